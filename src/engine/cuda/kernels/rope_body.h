// Body of the RoPE kernel: in place on x [n][n_heads][head_dim], the first n_pairs pairs of each
// head rotated by the angle of their token and pair index (src/engine/rope.h, with cos/sin
// [n][n_pairs] computed on the host by RopeTable::angles). Pair i is (2i, 2i+1) of the head
// (apply_rope, `llama` layout) or (i, i + n_pairs) with split_half (apply_rope_split_half: the
// qwen2/3, phi3 and gemma layout); n_pairs < head_dim / 2 leaves the tail as it is (partial
// rotary).
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kRopeThreads = 256;

template <class T>
PITH_HD void rope_body(uint32_t block, uint32_t n_blocks, uint32_t t, T* x, uint32_t n,
                       uint32_t n_heads, uint32_t head_dim, uint32_t n_pairs, bool split_half,
                       const float* cos_v, const float* sin_v) {
  size_t pairs_per_token = size_t{n_heads} * n_pairs;
  grid_stride(block, n_blocks, t, kRopeThreads, size_t{n} * pairs_per_token, [&](size_t p) {
    size_t token = p / pairs_per_token, in_token = p % pairs_per_token;
    size_t head = in_token / n_pairs, i = in_token % n_pairs;
    size_t angle = token * n_pairs + i;
    T* h = x + (token * n_heads + head) * head_dim;
    size_t a = split_half ? i : 2 * i, b = split_half ? i + n_pairs : 2 * i + 1;
    float c = cos_v[angle], s = sin_v[angle];
    float x0 = to_f32(h[a]), x1 = to_f32(h[b]);
    store_f32(h + a, x0 * c - x1 * s);
    store_f32(h + b, x0 * s + x1 * c);
  });
}

}  // namespace pith::cuda::kern
