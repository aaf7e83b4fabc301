// SlotPool: a validated free list. See slot_pool.h.
#include "backend/slot_pool.h"

#include "common/error.h"

namespace pith {

SlotPool::SlotPool(uint32_t capacity, std::string what)
    : capacity_(capacity), what_(std::move(what)) {
  free_.resize(capacity);
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  allocated_.assign(capacity, 0);
}

std::vector<uint32_t> SlotPool::allocate(size_t n) {
  std::vector<uint32_t> out;
  allocate(n, out);
  return out;
}

void SlotPool::allocate(size_t n, std::vector<uint32_t>& out) {
  if (n > free_.size())
    fail("out of {}: {} requested, {} of {} free", what_, n, free_.size(), capacity_);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = free_.back();
    free_.pop_back();
    allocated_[out[i]] = 1;
  }
}

void SlotPool::free(std::span<const uint32_t> ids) {
  // Validate everything first (a duplicate is marked 2 while scanning, then unmarked), so a
  // bad call leaves the pool unchanged.
  size_t checked = 0;
  const char* problem = nullptr;
  uint32_t bad = 0;
  for (; checked < ids.size(); ++checked) {
    uint32_t id = ids[checked];
    if (id >= capacity_) {
      problem = "out of range";
      bad = id;
      break;
    }
    if (allocated_[id] != 1) {
      problem = allocated_[id] == 2 ? "listed twice" : "not allocated";
      bad = id;
      break;
    }
    allocated_[id] = 2;
  }
  for (size_t i = 0; i < checked; ++i) allocated_[ids[i]] = 1;
  if (problem) fail("cannot free {} {}: {} (pool has {})", what_, bad, problem, capacity_);
  // Push in reverse so that the first id of the list is the next one handed out.
  for (size_t i = ids.size(); i-- > 0;) {
    allocated_[ids[i]] = 0;
    free_.push_back(ids[i]);
  }
}

}  // namespace pith
