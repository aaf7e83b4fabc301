// KvPool: preallocation, the free list and K/V copies. See kv_pool.h for the page layout.
#include "engine/kv_pool.h"

#include <cstring>

#include "common/error.h"

namespace pith {

KvPool::KvPool(const KvShape& shape, size_t memory_bytes) : shape_(shape) {
  if (shape.n_layers == 0 || shape.n_kv_heads == 0 || shape.head_dim == 0 || shape.page_size == 0)
    fail("KV pool: empty shape (layers {}, kv heads {}, head_dim {}, page size {})",
         shape.n_layers, shape.n_kv_heads, shape.head_dim, shape.page_size);
  page_floats_ = shape.page_floats();
  size_t n = memory_bytes / shape.page_bytes();
  if (n == 0)
    fail("KV pool: a budget of {} bytes does not hold one page of {} bytes ({} tokens)",
         memory_bytes, shape.page_bytes(), shape.page_size);
  if (n > UINT32_MAX - 1) n = UINT32_MAX - 1;
  n_pages_ = static_cast<uint32_t>(n);
  // new float[] without () leaves the memory uninitialised: the OS commits it on first touch.
  data_.reset(new float[n * page_floats_]);
  free_.resize(n_pages_);
  for (uint32_t i = 0; i < n_pages_; ++i) free_[i] = n_pages_ - 1 - i;
  allocated_.assign(n_pages_, 0);
}

std::vector<uint32_t> KvPool::allocate(size_t n) {
  if (n > free_.size())
    fail("out of KV pages: {} requested, {} of {} free", n, free_.size(), n_pages_);
  std::vector<uint32_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = free_.back();
    free_.pop_back();
    allocated_[out[i]] = 1;
  }
  return out;
}

void KvPool::free(std::span<const uint32_t> pages) {
  // Validate everything first (a duplicate is marked 2 while scanning, then unmarked), so a
  // bad call leaves the pool unchanged.
  size_t checked = 0;
  const char* problem = nullptr;
  uint32_t bad = 0;
  for (; checked < pages.size(); ++checked) {
    uint32_t p = pages[checked];
    if (p >= n_pages_) { problem = "out of range"; bad = p; break; }
    if (allocated_[p] != 1) {
      problem = allocated_[p] == 2 ? "listed twice" : "not allocated";
      bad = p;
      break;
    }
    allocated_[p] = 2;
  }
  for (size_t i = 0; i < checked; ++i) allocated_[pages[i]] = 1;
  if (problem) fail("KV pool: cannot free page {}: {} (pool has {} pages)", bad, problem, n_pages_);
  // Push in reverse so that the first page of the list is the next one handed out.
  for (size_t i = pages.size(); i-- > 0;) {
    allocated_[pages[i]] = 0;
    free_.push_back(pages[i]);
  }
}

void KvPool::write(uint32_t page, uint32_t slot, uint32_t layer, const float* k_row,
                   const float* v_row) {
  const uint32_t hd = shape_.head_dim;
  for (uint32_t h = 0; h < shape_.n_kv_heads; ++h) {
    std::memcpy(k(page, layer, h) + size_t{slot} * hd, k_row + size_t{h} * hd, hd * sizeof(float));
    std::memcpy(v(page, layer, h) + size_t{slot} * hd, v_row + size_t{h} * hd, hd * sizeof(float));
  }
}

void KvPool::copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot,
                  uint32_t n) {
  if (src_page >= n_pages_ || dst_page >= n_pages_)
    fail("copy_kv: page id out of range (src {}, dst {}, pool has {})", src_page, dst_page,
         n_pages_);
  const uint32_t ps = shape_.page_size;
  if (uint64_t{src_slot} + n > ps || uint64_t{dst_slot} + n > ps)
    fail("copy_kv: range past the page end (src offset {}, dst offset {}, n {}, page size {})",
         src_slot, dst_slot, n, ps);
  if (n == 0) return;
  const uint32_t hd = shape_.head_dim;
  for (uint32_t l = 0; l < shape_.n_layers; ++l)
    for (uint32_t h = 0; h < shape_.n_kv_heads; ++h) {
      std::memmove(k(dst_page, l, h) + size_t{dst_slot} * hd, k(src_page, l, h) + size_t{src_slot} * hd,
                   size_t{n} * hd * sizeof(float));
      std::memmove(v(dst_page, l, h) + size_t{dst_slot} * hd, v(src_page, l, h) + size_t{src_slot} * hd,
                   size_t{n} * hd * sizeof(float));
    }
}

}  // namespace pith
