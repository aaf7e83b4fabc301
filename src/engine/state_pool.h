// Recurrent state slots of hybrid models (Qwen3.5's Gated DeltaNet layers): the fixed-size
// summary of a sequence that those layers keep instead of KV pages. One slot per sequence holds
// every recurrent layer's conv window and state matrices (f32,
// ModelConfig::recurrent_state_floats), laid out [recurrent layer][DeltaNetConfig layout].
//
// Like KV pages the slots are preallocated from a budget and handed out by a free list; the
// control layer owns them per sequence (fork = copy, suspension = save/load images). A slot is
// cleared (zero: the state before any token) when the control layer starts a sequence in it;
// the forward then advances it over each batch's inputs of that sequence, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/model_config.h"
#include "backend/slot_pool.h"

namespace pith {

// Slots of a state pool of `memory_bytes` for the model (0 without recurrent layers). Throws
// pith::Error when a hybrid model's budget does not hold one slot. Shared with the CUDA backend's
// device pool, so both count and refuse alike.
uint32_t state_slots_in_budget(const ModelConfig& config, size_t memory_bytes);

class StatePool {
 public:
  // floor(memory_bytes / slot bytes) slots, none for a model without recurrent layers. Throws
  // pith::Error when a hybrid model's budget does not hold one slot.
  StatePool(const ModelConfig& config, size_t memory_bytes);
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;

  uint32_t capacity() const { return slots_.capacity(); }
  size_t slot_floats() const { return slot_floats_; }
  size_t slot_bytes() const { return slot_floats_ * sizeof(float); }
  SlotPool& slots() { return slots_; }
  const SlotPool& slots() const { return slots_; }

  // A slot's state (unchecked: callers validate ids first), and the block of its
  // `recurrent_index`-th recurrent layer.
  float* slot(uint32_t id) { return data_.get() + id * slot_floats_; }
  float* layer(uint32_t id, uint32_t recurrent_index) {
    return slot(id) + recurrent_index * layer_floats_;
  }

  void clear(uint32_t id);
  void copy(uint32_t src, uint32_t dst);

 private:
  size_t layer_floats_ = 0;
  size_t slot_floats_ = 0;
  SlotPool slots_;
  std::unique_ptr<float[]> data_;  // [capacity][slot_floats], uninitialised until cleared
};

}  // namespace pith
