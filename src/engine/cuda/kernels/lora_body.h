// Bodies of the LoRA row kernels (engine/cuda/lora.h): gather the input rows of one adapter's
// tokens, and add that adapter's scaled delta back into the projection's output rows. One
// element per step of a grid-stride loop; consecutive threads take consecutive columns.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kLoraThreads = 256;

// dst[i][:] = src[idx[i]][:], rows of d elements of T.
template <class T>
PITH_HD void lora_gather_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* src,
                              const uint32_t* idx, uint32_t n, uint32_t d, T* dst) {
  grid_stride(block, n_blocks, t, kLoraThreads, size_t{n} * d, [&](size_t i) {
    size_t row = i / d, col = i % d;
    dst[i] = src[size_t{idx[row]} * d + col];
  });
}

// y[idx[i]][col0 + j] += scale * v[i][j] for i < n, j < d; y rows have ldy elements of T, v is
// F32 [n][d]. idx entries are distinct (each token belongs to one adapter).
template <class T>
PITH_HD void lora_add_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* v,
                           const uint32_t* idx, uint32_t n, uint32_t d, float scale, T* y,
                           uint32_t ldy, uint32_t col0) {
  grid_stride(block, n_blocks, t, kLoraThreads, size_t{n} * d, [&](size_t i) {
    size_t row = i / d, col = i % d;
    T* out = y + size_t{idx[row]} * ldy + col0 + col;
    store_f32(out, to_f32(*out) + scale * v[i]);
  });
}

}  // namespace pith::cuda::kern
