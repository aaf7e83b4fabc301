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
//    from the tail. A single call larger than the token limit still runs alone (chunking, when
//    enabled, has split it before it gets here).
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
};
inline constexpr size_t kNumCallTypes = 4;

const char* call_type_name(CallType t);

// What the scheduler needs to know about one pending call.
struct CallInfo {
  uint64_t id = 0;
  CallType type = CallType::Forward;
  uint32_t n_tokens = 0;  // tokens it adds to a batch (its share of the token budget)
  uint32_t n_seqs = 1;    // sequences it adds
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

struct BatchLimits {
  uint32_t max_tokens = 0;  // 0: unlimited
  uint32_t max_seqs = 0;    // 0: unlimited
  uint32_t max_calls = 0;   // 0: unlimited (the eager policy sets 1)
};

struct BatchPlan {
  CallType type = CallType::Forward;
  // (queue_id, number of calls taken from the front of that queue), in execution order.
  std::vector<std::pair<uint64_t, uint32_t>> takes;
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
