// FakeBackend: a Backend with no weights, for tests of everything above the seam (control layer,
// runtime bridge, serving stack). It keeps the real contract of engine/backend.h: the same
// SlotPool free lists, the same validation (engine/batch_validation.h, so bad batches fail with
// the real engine's messages), page tables, explicit positions, run-length masks, Embed inputs
// and outputs, copy_kv. Instead of K/V tensors its "KV" records, per (page, slot), what was
// written there: the input (a token, or the hidden state an Embed carried) and its position.
//
// An input's output is a deterministic function of the records of the slots it can see (causal
// or its mask row) and of its own input and position. Like attention, it does not depend on the
// order of the visible slots nor on which physical page holds them (permuted page tables, forks
// over shared pages, copies). One simplification: a slot's record is the input alone, whereas
// the real engine's deeper-layer K/V also depend on what that input saw when it was written.
// The next-token distribution comes from a hash of that view, or from a test's script:
//
//   fake.set_script([](const FakeView& v) -> std::optional<TokenDistribution> {
//     if (v.visible_tokens.back() == 11) return FakeBackend::certainly(12);
//     return std::nullopt;  // default: the hashed distribution
//   });
//   fake.set_script(script_continuation(prompt_ids, answer_ids));
//
// Knobs for tests of batching and failure paths: a forward delay (per call and per input),
// one-shot failure injection (pith::Error or std::bad_alloc on the Nth call of a handler), and
// counters of calls, batches, sequences and inputs.
//
// Threads: handlers are serialised by the caller (backend.h); knobs, counters and the
// inspection accessors may be called from any thread. A script runs inside a handler and must
// not call the backend's handlers (it may read counters()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace pith {

// What one input, KV slot or Embed holds in the fake.
struct FakeEntry {
  int32_t token = -1;     // the token, or -1 for a hidden state (an output Embed) / never written
  uint64_t state = 0;     // identity of the vector: a hash of the token or of the hidden state
  uint32_t position = 0;  // the position it was written for
  bool written = false;
};

// The view one output is computed from: the visible slots in context order, and the input.
struct FakeView {
  std::vector<int32_t> visible_tokens;      // FakeEntry::token of each visible slot
  std::vector<uint32_t> visible_positions;  // FakeEntry::position of each visible slot
  int32_t token = -1;                       // the input (-1: a hidden-state Embed input)
  uint32_t position = 0;
  uint64_t state = 0;  // hash of the visible entries (as a set) and the input: the default seed
};

// Returns the next-token distribution for a view, or nullopt for the default one. The ids must
// be distinct and in the vocabulary, probabilities positive and summing to at most 1; the mass
// left over is spread evenly over the other tokens.
using FakeScript = std::function<std::optional<TokenDistribution>(const FakeView&)>;

// A script that, whenever the visible tokens end with `prefix` followed by the first k tokens
// of `continuation` (k < its length), emits continuation[k] with certainty, and otherwise
// leaves the view to the default: "after this prompt, answer this".
FakeScript script_continuation(std::vector<int32_t> prefix, std::vector<int32_t> continuation);

enum class FakeHandler : uint8_t { Forward, EmbedTokens, CopyKv, NextDist, SaveKv, LoadKv };
enum class FakeFailure : uint8_t { Error, OutOfMemory };  // pith::Error, std::bad_alloc

struct FakeCounters {
  uint64_t forward_calls = 0;  // every forward() call, rejected and failed ones included
  uint64_t batches = 0;        // forward() calls that ran
  uint64_t sequences = 0;      // sequences of the batches that ran
  uint64_t tokens = 0;         // inputs of the batches that ran
  uint64_t outputs = 0;        // outputs of the batches that ran
  uint64_t max_batch_sequences = 0;
  uint64_t max_batch_tokens = 0;
  uint64_t embed_tokens_calls = 0;
  uint64_t copy_kv_calls = 0;
  uint64_t next_dist_calls = 0;
  uint64_t pages_saved = 0, pages_loaded = 0;  // swap images
  uint64_t rejected = 0;                       // calls of any handler that failed validation
  uint64_t injected_failures = 0;
};

struct FakeBackendOptions {
  uint32_t page_size = 16;
  uint32_t n_pages = 64;
  uint32_t n_embeds = 64;
};

class FakeBackend final : public Backend {
 public:
  // Needs only config.vocab_size and config.d_model (non-zero); the rest is reported as given.
  FakeBackend(const ModelConfig& config, const FakeBackendOptions& options);
  // Pool sizes as the CPU engine would derive them from `options` for this config (pages of
  // n_layers * 2 * page_size * kv_dim floats in kv_memory_bytes, max_embeds Embed slots), so a
  // stack on the fake has the pages a stack on the CPU engine would.
  FakeBackend(const ModelConfig& config, const BackendOptions& options);

  const ModelConfig& config() const override { return config_; }
  BackendInfo info() const override;
  uint32_t page_size() const override { return page_size_; }
  SlotPool& page_slots() override { return pages_; }
  SlotPool& embed_slots() override { return embeds_; }

  std::vector<SequenceResult> forward(const std::vector<SequenceInput>& batch) override;
  void embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                    std::span<const uint32_t> slots) override;
  void copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset, uint32_t dst_offset,
               uint32_t n) override;
  TokenDistribution next_dist(uint32_t embed_slot, uint32_t top_k) override;
  // A page image is its page_size entries, field by field (kEntryBytes each).
  size_t kv_page_bytes() const override { return size_t{page_size_} * kEntryBytes; }
  void save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) override;
  void load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) override;

  // ---- knobs ----
  void set_script(FakeScript script);
  // Every forward() that runs sleeps per_call + per_input * (inputs in the batch).
  void set_forward_delay(std::chrono::microseconds per_call,
                         std::chrono::microseconds per_input = {});
  // The n-th valid call of `handler` from now (1 = the next) throws `kind` after validation,
  // before any state changes, and so do the `times - 1` calls after it (a failure that outlasts
  // the controller's one-by-one retry of a rejected batch). One pending failure per handler; a
  // new one replaces it.
  void fail_call(FakeHandler handler, uint64_t n, FakeFailure kind = FakeFailure::Error,
                 uint32_t times = 1);

  // ---- inspection ----
  FakeCounters counters() const;
  FakeEntry kv_entry(uint32_t page, uint32_t slot) const;
  FakeEntry embed_entry(uint32_t embed_slot) const;
  // The deterministic d_model vector an Embed slot stands for (a function of its entry).
  std::vector<float> embed_vector(uint32_t embed_slot) const;

  // The default distribution's logits for a view (all vocab_size of them), and the script's
  // distribution turned into logits when it answers: what Logits outputs return.
  std::vector<float> logits(const FakeView& view) const;
  // {token} with probability 1.
  static TokenDistribution certainly(int32_t token);

 private:
  static constexpr size_t kEntryBytes = 4 + 8 + 4 + 1;  // token, state, position, written
  struct EmbedRecord {
    FakeEntry entry;
    std::shared_ptr<const FakeView> view;  // what next_dist reads (null: never written)
  };

  // Counts a call of `handler`, runs its validation (counting a rejection), then throws the
  // injected failure when this valid call is the one it was set for.
  void enter(FakeHandler handler, const std::function<void()>& validate);
  FakeScript script() const;
  FakeEntry& kv_slot(uint32_t page, uint32_t slot);
  FakeEntry kv_slot_or_empty(uint32_t page, uint32_t slot) const;
  FakeView view_of(const SequenceInput& seq, uint32_t input, uint32_t ctx,
                   const FakeEntry& input_entry) const;
  std::vector<float> logits_for(const FakeView& view, const FakeScript& script) const;

  ModelConfig config_;
  uint32_t page_size_;
  SlotPool pages_;
  SlotPool embeds_;

  // Records, touched only inside handlers (state_mu_ also serves the inspection accessors).
  mutable std::mutex state_mu_;
  std::unordered_map<uint32_t, std::vector<FakeEntry>> kv_;  // page -> [page_size]; lazily
  std::vector<EmbedRecord> embed_records_;                   // [n_embeds]

  // Knobs and counters (knob_mu_ only, never held while a handler computes or sleeps).
  mutable std::mutex knob_mu_;
  FakeScript script_;
  std::chrono::microseconds delay_per_call_{0}, delay_per_input_{0};
  struct PendingFailure {
    uint64_t calls_left = 0;  // 0: none
    FakeFailure kind = FakeFailure::Error;
    uint32_t times = 1;
  };
  PendingFailure failures_[6];
  FakeCounters counters_;
};

}  // namespace pith
