// Bodies of the KV pool kernels. The pool is pool[page][layer][k|v][slot][kv_head][head_dim]
// (CUDA_SPEC.md, KvPoolLayout in paged_attention.h); KvGeometry is that layout reduced to the
// strides the kernels index with, so the bodies need no CUDA header.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kKvThreads = 256;

// A run of n_layers consecutive layers of one shape, starting `base` elements into each page
// (the whole pool when every layer has one shape; one layer or one run of them when gemma4's
// global layers differ). `layer` below counts from the run's first layer.
struct KvGeometry {
  size_t page_elems = 0;   // one page: every layer's K and V block
  size_t block_elems = 0;  // one (page, layer) K or V block: page_size * kv_dim
  uint32_t kv_dim = 0;
  uint32_t n_layers = 0;
  size_t base = 0;

  PITH_HD size_t offset(uint32_t page, uint32_t layer, uint32_t kv, uint32_t slot) const {
    return size_t{page} * page_elems + base + (size_t{layer} * 2 + kv) * block_elems +
           size_t{slot} * kv_dim;
  }
};

// Both bodies move N consecutive elements of a kv row per step (N = 1, or a 16-byte vector
// when kv_dim and the pointers allow: kv_dim % N == 0, so a vector never leaves its row).

// Row i of k and v [n][kv_dim] goes to slot slots[i] of page pages[i], layer `layer`.
template <uint32_t N, class T>
PITH_HD void kv_append_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* k, const T* v,
                            uint32_t n, const uint32_t* pages, const uint32_t* slots,
                            uint32_t layer, KvGeometry g, T* pool) {
  grid_stride(block, n_blocks, t, kKvThreads, size_t{n} * g.kv_dim / N, [&](size_t grp) {
    size_t i = grp * N, row = i / g.kv_dim, col = i % g.kv_dim;
    size_t k_at = g.offset(pages[row], layer, 0, slots[row]) + col;
    copy_n<N>(k + i, pool + k_at);
    copy_n<N>(v + i, pool + k_at + g.block_elems);  // the V block follows the K block
  });
}

// One thread per column group (layer, k|v, N elements of the kv row) walks the n slots in the
// direction that makes overlapping ranges on one page behave as memmove; columns are
// independent, so the copy has no race, and neighbouring threads touch neighbouring elements.
template <uint32_t N, class T>
PITH_HD void kv_copy_body(uint32_t block, uint32_t n_blocks, uint32_t t, uint32_t src_page,
                          uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n,
                          KvGeometry g, T* pool) {
  bool backwards = src_page == dst_page && dst_slot > src_slot;
  size_t groups = size_t{g.n_layers} * 2 * g.kv_dim / N;
  grid_stride(block, n_blocks, t, kKvThreads, groups, [&](size_t grp) {
    size_t c = grp * N;
    uint32_t block_index = static_cast<uint32_t>(c / g.kv_dim);  // layer * 2 + kv
    size_t col = c % g.kv_dim;
    const T* src = pool + g.offset(src_page, block_index / 2, block_index % 2, src_slot) + col;
    T* dst = pool + g.offset(dst_page, block_index / 2, block_index % 2, dst_slot) + col;
    for (uint32_t s = 0; s < n; ++s) {
      size_t r = backwards ? n - 1 - s : s;
      copy_n<N>(src + r * g.kv_dim, dst + r * g.kv_dim);  // bits kept, as the CPU pool's memmove
    }
  });
}

}  // namespace pith::cuda::kern
