// Reference counts over a pool of physical slots (KV pages or Embed slots). Pages are shared
// by fork, export/import, the prefix cache and in-flight commands: a command holds a
// reference to every page and Embed it touches, so an inferlet that deallocates a page while
// a forward on it is still queued cannot see the page reused under that forward. A slot goes
// back to the pool's free list when its last reference goes.
//
// The free list underneath is the backend's SlotPool (engine/slot_pool.h): host-side ids only,
// whatever memory the backend keeps behind them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/slot_pool.h"
#include "common/error.h"

namespace pith {

class RefCounts {
 public:
  explicit RefCounts(SlotPool& pool) : pool_(pool), refs_(pool.capacity(), 0) {}

  // n fresh slots with one reference each, all or nothing; false when fewer than n are free.
  bool allocate(uint32_t n, std::vector<uint32_t>& out) {
    if (pool_.n_free() < n) return false;
    pool_.allocate(n, out);
    for (uint32_t id : out) refs_[id] = 1;
    return true;
  }
  void retain(uint32_t id) {
    PITH_CHECK(refs_[id] > 0);
    ++refs_[id];
  }
  void retain(std::span<const uint32_t> ids) {
    for (uint32_t id : ids) retain(id);
  }
  void release(uint32_t id) {
    PITH_CHECK(refs_[id] > 0);
    if (--refs_[id] == 0) pool_.free(std::span<const uint32_t>(&id, 1));
  }
  void release(std::span<const uint32_t> ids) {
    for (uint32_t id : ids) release(id);
  }
  uint32_t count(uint32_t id) const { return refs_[id]; }
  uint32_t n_free() const { return pool_.n_free(); }

 private:
  SlotPool& pool_;
  std::vector<uint32_t> refs_;
};

}  // namespace pith
