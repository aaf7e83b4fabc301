// KvPool: preallocation and K/V copies (the free list is a SlotPool). See kv_pool.h for the page
// layout.
#include "engine/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

uint32_t pages_in_budget(const KvShape& shape, size_t memory_bytes) {
  if (!shape.layers.empty() && shape.layers.size() != shape.n_layers)
    fail("KV pool: {} per-layer shapes for {} layers", shape.layers.size(), shape.n_layers);
  if (shape.dtype == KvDType::Auto) fail("KV pool: no element type chosen (auto)");
  if (shape.n_layers == 0 || shape.n_kv_heads == 0 || shape.head_dim == 0 || shape.page_size == 0 ||
      shape.page_elems() == 0)
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
      elem_bytes_(shape.elem_bytes()),
      page_elems_(shape.page_elems()),
      page_bytes_(shape.page_bytes()),
      n_pages_(pages_in_budget(shape, memory_bytes)),
      // new[] without () leaves the memory uninitialised: the OS commits it on first touch.
      data_(new std::byte[size_t{n_pages_} * page_bytes_]),
      slots_(n_pages_, "KV pages") {
  size_t offset = 0;
  for (uint32_t l = 0; l < shape.n_layers; ++l) {
    const size_t tile = size_t{shape.page_size} * shape.head_dim_of(l);
    blocks_.push_back({offset, tile, shape.heads_of(l)});
    offset += 2 * tile * shape.heads_of(l);
  }
}

KvShape kv_shape_for(const ModelConfig& c, uint32_t page_size, KvDType dtype) {
  KvShape s{c.n_kv_layers(), c.n_kv_heads, c.head_dim,
            page_size,       {},           dtype == KvDType::Auto ? KvDType::F32 : dtype};
  if (c.uniform_attention()) return s;
  for (uint32_t l = 0; l < c.n_layers; ++l)
    if (c.layer_has_kv(l)) s.layers.push_back({c.kv_heads_of(l), c.head_dim_of(l)});
  return s;
}

namespace {

// n f32 values rounded into elements of `t` at dst.
void store_row(KvDType t, const float* src, std::byte* dst, size_t n) {
  if (t == KvDType::F32) return (void)std::memcpy(dst, src, n * sizeof(float));
  auto* d = reinterpret_cast<uint16_t*>(dst);
  if (t == KvDType::F16) return f32_to_f16_row(src, d, n);
  f32_to_bf16_row(src, d, n);
}

}  // namespace

void KvPool::write(uint32_t page, uint32_t slot, uint32_t layer, const float* k_row,
                   const float* v_row) {
  const uint32_t hd = shape_.head_dim_of(layer);
  const size_t row_bytes = size_t{hd} * elem_bytes_;
  for (uint32_t h = 0; h < shape_.heads_of(layer); ++h) {
    store_row(shape_.dtype, k_row + size_t{h} * hd, k(page, layer, h) + slot * row_bytes, hd);
    store_row(shape_.dtype, v_row + size_t{h} * hd, v(page, layer, h) + slot * row_bytes, hd);
  }
}

void KvPool::read(uint32_t page, uint32_t layer, uint32_t kv, uint32_t kv_head, uint32_t slot,
                  float* out) const {
  const uint32_t hd = shape_.head_dim_of(layer);
  const std::byte* row = (kv == 0 ? k(page, layer, kv_head) : v(page, layer, kv_head)) +
                         size_t{slot} * hd * elem_bytes_;
  if (shape_.dtype == KvDType::F32) return (void)std::memcpy(out, row, hd * sizeof(float));
  const auto* r = reinterpret_cast<const uint16_t*>(row);
  if (shape_.dtype == KvDType::F16) return f16_to_f32_row(r, out, hd);
  bf16_to_f32_row(r, out, hd);
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
    for (uint32_t h = 0; h < shape_.heads_of(l); ++h) {
      const size_t row = size_t{shape_.head_dim_of(l)} * elem_bytes_;
      std::memmove(k(dst_page, l, h) + dst_slot * row, k(src_page, l, h) + src_slot * row, n * row);
      std::memmove(v(dst_page, l, h) + dst_slot * row, v(src_page, l, h) + src_slot * row, n * row);
    }
}

}  // namespace pith
