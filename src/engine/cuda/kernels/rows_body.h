// Bodies of the row-moving kernels: token embedding (F32 or BF16 table to F32 rows) and the
// gather/scatter of F32 rows between the hidden stream and the Embed slots. Element-wise over
// the n * d outputs with a grid-stride loop; consecutive threads take consecutive columns, so
// every load and store is coalesced.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kRowThreads = 256;

// Every body moves N consecutive elements of a row per step (N = 1, or a 16-byte vector when
// the launcher found rows and pointers aligned for it: d % N == 0).

template <uint32_t N, class T>
PITH_HD void embed_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* table,
                             const int32_t* tokens, uint32_t n, uint32_t d, float* out) {
  grid_stride(block, n_blocks, t, kRowThreads, size_t{n} * d / N, [&](size_t g) {
    size_t i = g * N, row = i / d, col = i % d;
    float x[N];
    load_n<N>(table + static_cast<size_t>(static_cast<uint32_t>(tokens[row])) * d + col, x);
    store_n<N>(out + i, x);
  });
}

// dst[i][:] = src[idx[i]][:]
template <uint32_t N>
PITH_HD void gather_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* src,
                              const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  grid_stride(block, n_blocks, t, kRowThreads, size_t{n} * d / N, [&](size_t g) {
    size_t i = g * N, row = i / d, col = i % d;
    float x[N];
    load_n<N>(src + size_t{idx[row]} * d + col, x);
    store_n<N>(dst + i, x);
  });
}

// dst[idx[i]][:] = src[i][:] (idx entries distinct)
template <uint32_t N>
PITH_HD void scatter_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* src,
                               const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  grid_stride(block, n_blocks, t, kRowThreads, size_t{n} * d / N, [&](size_t g) {
    size_t i = g * N, row = i / d, col = i % d;
    float x[N];
    load_n<N>(src + i, x);
    store_n<N>(dst + size_t{idx[row]} * d + col, x);
  });
}

}  // namespace pith::cuda::kern
