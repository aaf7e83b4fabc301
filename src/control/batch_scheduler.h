// The batch scheduler (paper §5.2, Figure 4) as a step function over plain data: given the
// pending calls of every command queue, pick the next batch. No I/O, no engine: the
// controller feeds it and executes the plan, and tests drive it directly.
//
// Rules:
//  - Calls of one queue execute in order, so only a queue's head is eligible; after the head,
//    *vertical batching* takes the consecutive calls of the same type that do not conflict
//    with the calls already taken from that queue (no two writes to one page, no read of a
//    page another taken call writes).
//  - *Horizontal batching* groups calls of one type across queues.
//  - The batch's type is the one whose oldest eligible call has waited longest.
//  - Higher-priority queues go first; a batch over the limits (tokens, sequences) is cut
//    from the tail.
//  - Chunked prefill (token budget set): a forward call larger than what is left of the budget
//    is split, and its first part fills the batch; the rest stays at the head of its queue
//    for the next batch. Without a budget a call of any size runs whole.
//  - Prefill/decode-aware formation (Sarathi-style, the default): a forward batch first takes
//    every pending single-token (decode) call up to the sequence limit, then fills the
//    remaining token budget with prefill chunks in arrival order, so decodes never stall
//    behind a long prompt. With a long-prefill threshold, prefills up to that many tokens go
//    before longer ones (each class in arrival order), so a short prompt never waits for the
//    chunks of a long one (vLLM's long_prefill_token_threshold plays the same role).
//    `fcfs` formation takes calls strictly by priority and age.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pith {

enum class CallType : uint8_t {
  Forward,      // engine.forward (tokens or embeds in; KV, distributions, embeds out)
  EmbedTokens,  // engine.embed_tokens
  NextDist,     // engine.next_dist
  CopyKv,       // engine.copy_kv
  CopyState,    // engine.copy_state (hybrid models)
};
inline constexpr size_t kNumCallTypes = 5;

const char* call_type_name(CallType t);

// What the scheduler needs to know about one pending call.
struct CallInfo {
  uint64_t id = 0;
  CallType type = CallType::Forward;
  uint32_t n_tokens = 0;         // tokens it adds to a batch (its share of the token budget)
  uint32_t n_seqs = 1;           // sequences it adds
  bool splittable = false;       // a forward over several inputs that may run in chunks
  std::vector<uint32_t> reads;   // physical pages it reads (KV context)
  std::vector<uint32_t> writes;  // physical pages it writes (new K/V)
  int64_t enqueued_ns = 0;
};

// One command queue's pending calls, oldest first.
struct QueueView {
  uint64_t queue_id = 0;
  int32_t priority = 0;  // higher runs first
  std::span<const CallInfo> pending;
};

enum class BatchFormation : uint8_t { DecodeFirst, Fcfs };

struct BatchLimits {
  uint32_t max_tokens = 0;  // 0: unlimited (and no chunking)
  uint32_t max_seqs = 0;    // 0: unlimited
  uint32_t max_calls = 0;   // 0: unlimited (the eager policy sets 1)
  BatchFormation formation = BatchFormation::DecodeFirst;
  uint32_t long_prefill_threshold = 0;  // DecodeFirst: prefills above this go last; 0: off
  // DecodeFirst: a batch that holds decode steps is held to this many tokens in all (0: only the
  // token budget), so the running streams' next token is not held up by a long prefill chunk;
  // the decodes' own tokens count against it and the prefill beside them still gets at least
  // min_prefill_with_decodes. The controller derives it from --itl-target-ms and the measured
  // time per forward token.
  uint32_t tokens_with_decodes = 0;
  uint32_t min_prefill_with_decodes = 1;
};

// What one batch takes from one queue: `calls` whole calls from the front, then, when
// partial_tokens > 0, the first partial_tokens inputs of the next call (a prefill chunk).
struct QueueTake {
  uint64_t queue_id = 0;
  uint32_t calls = 0;
  uint32_t partial_tokens = 0;
  bool operator==(const QueueTake&) const = default;
};

struct BatchPlan {
  CallType type = CallType::Forward;
  std::vector<QueueTake> takes;  // in execution order
  uint32_t n_calls = 0;
  uint32_t n_tokens = 0;
  uint32_t n_seqs = 0;
  bool empty() const { return n_calls == 0; }
};

BatchPlan form_batch(std::span<const QueueView> queues, const BatchLimits& limits);

// Number of calls that could be dispatched right now (heads of non-empty queues): what the
// dispatch policies count.
size_t count_eligible(std::span<const QueueView> queues);

}  // namespace pith
