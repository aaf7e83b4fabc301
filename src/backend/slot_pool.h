// SlotPool: the free list of a preallocated pool of fixed-size slots (KV pages, Embed slots).
// Only bookkeeping: which ids are handed out. The storage behind the ids belongs to a backend
// (host memory for the CPU engine, device memory for CUDA), so every backend shares one
// allocation rule and the control layer's reference counts sit on top of it.
//
// Order: a fresh pool hands out ids in increasing order; after frees, the most recently freed
// ids come first (a stack), so hot slots are reused while they are still in cache.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pith {

class SlotPool {
 public:
  // `what` names the slots in error messages ("KV pages", "Embed slots").
  SlotPool(uint32_t capacity, std::string what);

  uint32_t capacity() const { return capacity_; }
  uint32_t n_free() const { return static_cast<uint32_t>(free_.size()); }
  bool valid(uint32_t id) const { return id < capacity_; }
  bool allocated(uint32_t id) const { return id < capacity_ && allocated_[id] != 0; }

  // Takes n ids, all or nothing: throws pith::Error ("out of KV pages: ...") when fewer than
  // n are free, leaving the pool unchanged.
  std::vector<uint32_t> allocate(size_t n);
  // The same into `out` (replacing its contents, keeping its capacity: no allocation on the
  // per-call path once the caller's vector has grown).
  void allocate(size_t n, std::vector<uint32_t>& out);
  // Returns ids to the free list. Throws pith::Error on an id out of range, not allocated or
  // listed twice, before freeing any of them.
  void free(std::span<const uint32_t> ids);

 private:
  uint32_t capacity_;
  std::string what_;
  std::vector<uint32_t> free_;      // stack, back = next to hand out
  std::vector<uint8_t> allocated_;  // [capacity]
};

}  // namespace pith
