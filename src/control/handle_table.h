// A per-inferlet handle space (paper §4.1: "each inferlet has its own virtual resource address
// space"). Handles are small integers an inferlet sees; each maps to a physical id the control
// layer owns. A handle never names another inferlet's resource: lookups are per table.
//
// Handles are reused after erase (free list), starting at 1 so that 0 is never valid.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pith {

class HandleTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  uint32_t insert(uint32_t physical) {
    uint32_t h;
    if (!free_.empty()) {
      h = free_.back();
      free_.pop_back();
      slots_[h - 1] = physical;
    } else {
      slots_.push_back(physical);
      h = static_cast<uint32_t>(slots_.size());
    }
    ++size_;
    return h;
  }

  std::optional<uint32_t> lookup(uint32_t handle) const {
    if (handle == 0 || handle > slots_.size() || slots_[handle - 1] == kNone) return std::nullopt;
    return slots_[handle - 1];
  }

  // Removes the handle and returns the physical id it named.
  std::optional<uint32_t> erase(uint32_t handle) {
    auto p = lookup(handle);
    if (!p) return std::nullopt;
    slots_[handle - 1] = kNone;
    free_.push_back(handle);
    --size_;
    return p;
  }

  size_t size() const { return size_; }

  // Replaces every live entry's physical id p with fn(p) (pages moved by a swap-in).
  template <typename Fn>
  void remap(Fn&& fn) {
    for (uint32_t& p : slots_)
      if (p != kNone) p = fn(p);
  }

  // Calls fn(handle, physical) for every live handle.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] != kNone) fn(static_cast<uint32_t>(i + 1), slots_[i]);
  }

 private:
  std::vector<uint32_t> slots_;  // handle - 1 -> physical id or kNone
  std::vector<uint32_t> free_;
  size_t size_ = 0;
};

}  // namespace pith
