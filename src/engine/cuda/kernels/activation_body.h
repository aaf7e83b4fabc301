// Bodies of the element-wise activation kernels: SwiGLU, the residual add of a DType row into
// the F32 stream, and F32 -> DType row conversion. Arithmetic in F32 as the CPU engine's
// (vector_ops.h), one rounding to DType on the store.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kActivationThreads = 256;

// Each body takes N consecutive elements per step (N = 1, or a 16-byte vector of T when the
// launcher found rows and pointers aligned for it).

// out[i][j] = silu(gate[i][j]) * up[i][j]; gate/up rows of leading dimension ld.
template <uint32_t N, class T>
PITH_HD void swiglu_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* gate, const T* up,
                         uint32_t n, uint32_t ff, uint32_t ld, T* out) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{n} * ff / N, [&](size_t grp) {
    size_t i = grp * N, src = (i / ff) * ld + i % ff;
    float g[N], u[N];
    load_n<N>(gate + src, g);
    load_n<N>(up + src, u);
    for (uint32_t e = 0; e < N; ++e) g[e] = g[e] / (1.0f + exp_f32(-g[e])) * u[e];
    store_n<N>(out + i, g);
  });
}

// residual[i] += x[i] over `total` elements.
template <uint32_t N, class T>
PITH_HD void add_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, float* residual,
                           const T* x, size_t total) {
  grid_stride(block, n_blocks, t, kActivationThreads, total / N, [&](size_t grp) {
    float r[N], v[N];
    load_n<N>(residual + grp * N, r);
    load_n<N>(x + grp * N, v);
    for (uint32_t e = 0; e < N; ++e) r[e] += v[e];
    store_n<N>(residual + grp * N, r);
  });
}

template <uint32_t N, class T>
PITH_HD void convert_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* src,
                               size_t total, T* dst) {
  grid_stride(block, n_blocks, t, kActivationThreads, total / N, [&](size_t grp) {
    float v[N];
    load_n<N>(src + grp * N, v);
    store_n<N>(dst + grp * N, v);
  });
}

}  // namespace pith::cuda::kern
