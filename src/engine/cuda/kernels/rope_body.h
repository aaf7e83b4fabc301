// Body of the RoPE kernel: in place on x [n][n_heads][head_dim], pair p = (2p, 2p+1) of the
// flattened array is rotated by the angle of its token and pair index (src/engine/rope.h's
// apply_rope, with cos/sin [n][head_dim/2] computed on the host by RopeTable::angles).
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kRopeThreads = 256;

template <class T>
PITH_HD void rope_body(uint32_t block, uint32_t n_blocks, uint32_t t, T* x, uint32_t n,
                       uint32_t n_heads, uint32_t head_dim, const float* cos_v,
                       const float* sin_v) {
  uint32_t half = head_dim / 2;
  size_t pairs_per_token = size_t{n_heads} * half;
  grid_stride(block, n_blocks, t, kRopeThreads, size_t{n} * pairs_per_token, [&](size_t p) {
    size_t angle = (p / pairs_per_token) * half + p % half;
    float c = cos_v[angle], s = sin_v[angle];
    float x0 = to_f32(x[2 * p]), x1 = to_f32(x[2 * p + 1]);
    store_f32(x + 2 * p, x0 * c - x1 * s);
    store_f32(x + 2 * p + 1, x0 * s + x1 * c);
  });
}

}  // namespace pith::cuda::kern
