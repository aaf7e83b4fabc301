// Bodies of the element-wise activation kernels: SwiGLU, the residual add of a DType row into
// the F32 stream, and F32 -> DType row conversion. Arithmetic in F32 as the CPU engine's
// (vector_ops.h), one rounding to DType on the store.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kActivationThreads = 256;

// out[i][j] = silu(gate[i][j]) * up[i][j]; gate/up rows of leading dimension ld.
template <class T>
PITH_HD void swiglu_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* gate, const T* up,
                         uint32_t n, uint32_t ff, uint32_t ld, T* out) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{n} * ff, [&](size_t i) {
    size_t src = (i / ff) * ld + i % ff;
    float g = to_f32(gate[src]);
    store_f32(out + i, g / (1.0f + exp_f32(-g)) * to_f32(up[src]));
  });
}

// residual[i] += x[i] over n * d elements.
template <class T>
PITH_HD void add_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, float* residual,
                           const T* x, size_t total) {
  grid_stride(block, n_blocks, t, kActivationThreads, total,
              [&](size_t i) { residual[i] += to_f32(x[i]); });
}

template <class T>
PITH_HD void convert_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* src,
                               size_t total, T* dst) {
  grid_stride(block, n_blocks, t, kActivationThreads, total,
              [&](size_t i) { store_f32(dst + i, src[i]); });
}

}  // namespace pith::cuda::kern
