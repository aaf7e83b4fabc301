// EmbedPool: preallocated Embed slots and their free list. See embed_pool.h.
#include "engine/embed_pool.h"

#include "common/error.h"

namespace pith {

EmbedPool::EmbedPool(uint32_t d_model, uint32_t capacity) : d_model_(d_model), capacity_(capacity) {
  if (d_model == 0 || capacity == 0)
    fail("Embed pool: empty shape (d_model {}, capacity {})", d_model, capacity);
  data_.assign(size_t{capacity} * d_model, 0.0f);
  positions_.assign(capacity, 0);
  free_.resize(capacity);
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  allocated_.assign(capacity, 0);
}

std::vector<uint32_t> EmbedPool::allocate(size_t n) {
  if (n > free_.size())
    fail("out of Embed slots: {} requested, {} of {} free", n, free_.size(), capacity_);
  std::vector<uint32_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = free_.back();
    free_.pop_back();
    allocated_[out[i]] = 1;
  }
  return out;
}

void EmbedPool::free(std::span<const uint32_t> slots) {
  size_t checked = 0;
  const char* problem = nullptr;
  uint32_t bad = 0;
  for (; checked < slots.size(); ++checked) {
    uint32_t s = slots[checked];
    if (s >= capacity_) { problem = "out of range"; bad = s; break; }
    if (allocated_[s] != 1) {
      problem = allocated_[s] == 2 ? "listed twice" : "not allocated";
      bad = s;
      break;
    }
    allocated_[s] = 2;
  }
  for (size_t i = 0; i < checked; ++i) allocated_[slots[i]] = 1;
  if (problem) fail("Embed pool: cannot free slot {}: {} (pool has {} slots)", bad, problem, capacity_);
  for (size_t i = slots.size(); i-- > 0;) {
    allocated_[slots[i]] = 0;
    free_.push_back(slots[i]);
  }
}

}  // namespace pith
