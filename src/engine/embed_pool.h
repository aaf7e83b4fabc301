// Embed slots: the engine-side storage of "Embeds" (paper Table 1): d_model-sized hidden
// vectors that a forward takes as inputs (instead of token ids) or writes as outputs (the final
// hidden state of an input). They let inferlets feed image/adapter embeddings, reuse hidden
// states, or ask for a distribution later with next_dist. Preallocated once: [capacity][d_model]
// f32 plus the position each slot was produced for. Slots are handed out by a free list like
// KV pages; the control layer maps its virtual Embed handles onto slot ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/slot_pool.h"

namespace pith {

class EmbedPool {
 public:
  // Throws pith::Error when d_model or capacity is 0.
  EmbedPool(uint32_t d_model, uint32_t capacity);
  EmbedPool(const EmbedPool&) = delete;
  EmbedPool& operator=(const EmbedPool&) = delete;

  uint32_t d_model() const { return d_model_; }
  uint32_t capacity() const { return capacity_; }
  uint32_t n_free() const { return slots_.n_free(); }

  // The free list of slot ids (SlotPool rules: all-or-nothing allocation, validated frees).
  SlotPool& slots() { return slots_; }
  const SlotPool& slots() const { return slots_; }
  std::vector<uint32_t> allocate(size_t n) { return slots_.allocate(n); }
  void free(std::span<const uint32_t> ids) { slots_.free(ids); }
  bool allocated(uint32_t slot) const { return slots_.allocated(slot); }

  // The [d_model] vector of a slot (unchecked: callers validate ids first).
  float* data(uint32_t slot) { return data_.data() + size_t{slot} * d_model_; }
  const float* data(uint32_t slot) const { return data_.data() + size_t{slot} * d_model_; }
  // The position the slot's vector was produced for (embed_tokens' position, or the position
  // of the input whose hidden state a forward wrote). Informational: a forward takes the
  // positions of its inputs from SequenceInput::positions.
  uint32_t position(uint32_t slot) const { return positions_[slot]; }
  void set_position(uint32_t slot, uint32_t pos) { positions_[slot] = pos; }
  // The token whose embedding the slot holds (embed_tokens), or -1 (a hidden state): models
  // with per-layer token embeddings (gemma4 E2B/E4B) look that token up again.
  int32_t token(uint32_t slot) const { return tokens_[slot]; }
  void set_token(uint32_t slot, int32_t token) { tokens_[slot] = token; }

 private:
  uint32_t d_model_;
  uint32_t capacity_;
  std::vector<float> data_;          // [capacity][d_model]
  std::vector<uint32_t> positions_;  // [capacity]
  std::vector<int32_t> tokens_;      // [capacity]
  SlotPool slots_;
};

}  // namespace pith
