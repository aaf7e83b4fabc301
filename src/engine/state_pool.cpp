// Recurrent state slots. See state_pool.h.
#include "engine/state_pool.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace pith {

uint32_t state_slots_in_budget(const ModelConfig& c, size_t memory_bytes) {
  const size_t bytes = c.recurrent_state_floats() * sizeof(float);
  if (bytes == 0) return 0;
  const size_t n = memory_bytes / bytes;
  if (n == 0)
    fail(
        "recurrent state pool: a budget of {} bytes does not hold one sequence's state of {} "
        "bytes (raise --state-memory)",
        memory_bytes, bytes);
  return static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX - 1));
}

StatePool::StatePool(const ModelConfig& c, size_t memory_bytes)
    : layer_floats_(c.delta_net.layer_state_floats()),
      slot_floats_(c.recurrent_state_floats()),
      slots_(state_slots_in_budget(c, memory_bytes), "recurrent states"),
      // Uninitialised: the OS commits it on first touch, a slot is cleared when it starts.
      data_(new float[slots_.capacity() * slot_floats_]) {}

void StatePool::clear(uint32_t id) {
  std::fill_n(slot(id), slot_floats_, 0.0f);
}

void StatePool::copy(uint32_t src, uint32_t dst) {
  if (src != dst) std::memcpy(slot(dst), slot(src), slot_bytes());
}

}  // namespace pith
