// KvPool: preallocation and K/V copies (the free list is a SlotPool). See kv_pool.h for the page
// layout.
#include "engine/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace pith {

namespace {

uint32_t pages_in_budget(const KvShape& shape, size_t memory_bytes) {
  if (!shape.layers.empty() && shape.layers.size() != shape.n_layers)
    fail("KV pool: {} per-layer shapes for {} layers", shape.layers.size(), shape.n_layers);
  if (shape.n_layers == 0 || shape.n_kv_heads == 0 || shape.head_dim == 0 || shape.page_size == 0 ||
      shape.page_floats() == 0)
    fail("KV pool: empty shape (layers {}, kv heads {}, head_dim {}, page size {})", shape.n_layers,
         shape.n_kv_heads, shape.head_dim, shape.page_size);
  size_t n = memory_bytes / shape.page_bytes();
  if (n == 0)
    fail("KV pool: a budget of {} bytes does not hold one page of {} bytes ({} tokens)",
         memory_bytes, shape.page_bytes(), shape.page_size);
  return static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX - 1));
}

}  // namespace

KvPool::KvPool(const KvShape& shape, size_t memory_bytes)
    : shape_(shape),
      page_floats_(shape.page_floats()),
      n_pages_(pages_in_budget(shape, memory_bytes)),
      // new float[] without () leaves the memory uninitialised: the OS commits it on first touch.
      data_(new float[size_t{n_pages_} * page_floats_]),
      slots_(n_pages_, "KV pages") {
  size_t offset = 0;
  for (uint32_t l = 0; l < shape.n_layers; ++l) {
    const size_t tile = size_t{shape.page_size} * shape.head_dim_of(l);
    blocks_.push_back({offset, tile, shape.heads_of(l)});
    offset += 2 * tile * shape.heads_of(l);
  }
}

KvShape kv_shape_for(const ModelConfig& c, uint32_t page_size) {
  KvShape s{c.n_kv_layers(), c.n_kv_heads, c.head_dim, page_size, {}};
  if (c.uniform_attention()) return s;
  for (uint32_t l = 0; l < c.n_layers; ++l)
    if (c.layer_has_kv(l)) s.layers.push_back({c.kv_heads_of(l), c.head_dim_of(l)});
  return s;
}

void KvPool::write(uint32_t page, uint32_t slot, uint32_t layer, const float* k_row,
                   const float* v_row) {
  const uint32_t hd = shape_.head_dim_of(layer);
  for (uint32_t h = 0; h < shape_.heads_of(layer); ++h) {
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
  for (uint32_t l = 0; l < shape_.n_layers; ++l)
    for (uint32_t h = 0, hd = shape_.head_dim_of(l); h < shape_.heads_of(l); ++h) {
      std::memmove(k(dst_page, l, h) + size_t{dst_slot} * hd,
                   k(src_page, l, h) + size_t{src_slot} * hd, size_t{n} * hd * sizeof(float));
      std::memmove(v(dst_page, l, h) + size_t{dst_slot} * hd,
                   v(src_page, l, h) + size_t{src_slot} * hd, size_t{n} * hd * sizeof(float));
    }
}

}  // namespace pith
