// Body of the fused residual add + RMSNorm: one block per row. Each thread adds the delta into
// its strided share of the residual row and sums the squares; the block sum gives the row's
// 1 / sqrt(mean(x²) + eps); then out = residual * inv * weight (vector_ops.h's rmsnorm order),
// stored as DType.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kNormThreads = 256;

struct NormShared {
  float partial[kNormThreads];
};

// N consecutive elements per step: 1, or 4 (16-byte F32 vectors) when d % 4 == 0 and the
// pointers are aligned (the launcher checks).
template <uint32_t N, class Block, class T>
PITH_HD void add_rmsnorm_body(const Block& blk, NormShared& sh, float* residual_all,
                              const float* delta_all, const float* weight, uint32_t d, float eps,
                              T* out_all) {
  size_t row = blk.block_x;
  float* residual = residual_all + row * d;
  const float* delta = delta_all ? delta_all + row * d : nullptr;
  T* out = out_all + row * d;
  blk.threads([&](uint32_t t) {
    float ss = 0;
    for (uint32_t j = t * N; j < d; j += kNormThreads * N) {
      float r[N];
      load_n<N>(residual + j, r);
      if (delta) {
        float x[N];
        load_n<N>(delta + j, x);
        for (uint32_t e = 0; e < N; ++e) r[e] += x[e];
        store_n<N>(residual + j, r);
      }
      for (uint32_t e = 0; e < N; ++e) ss += r[e] * r[e];
    }
    sh.partial[t] = ss;
  });
  blk.reduce_sum(sh.partial);
  float inv = 1.0f / sqrtf(sh.partial[0] / static_cast<float>(d) + eps);
  blk.threads([&](uint32_t t) {
    for (uint32_t j = t * N; j < d; j += kNormThreads * N) {
      float r[N], w[N];
      load_n<N>(residual + j, r);
      load_n<N>(weight + j, w);
      for (uint32_t e = 0; e < N; ++e) r[e] = r[e] * inv * w[e];
      store_n<N>(out + j, r);
    }
  });
}

// In place RMSNorm of one row of d elements of T per block (block_x = row): the per-head Q/K
// norms of qwen3 and gemma3 (rows = tokens x heads, d = head_dim). weight null means all ones
// (a weightless norm). Same order of operations as add_rmsnorm_body.
inline constexpr uint32_t kHeadNormThreads = 64;

template <class Block, class T>
PITH_HD void rmsnorm_rows_body(const Block& blk, NormShared& sh, T* x_all, const float* weight,
                               uint32_t d, float eps) {
  T* x = x_all + size_t{blk.block_x} * d;
  blk.threads([&](uint32_t t) {
    float ss = 0;
    for (uint32_t j = t; j < d; j += blk.n_threads) {
      float v = to_f32(x[j]);
      ss += v * v;
    }
    sh.partial[t] = ss;
  });
  blk.reduce_sum(sh.partial);
  float inv = 1.0f / sqrtf(sh.partial[0] / static_cast<float>(d) + eps);
  blk.threads([&](uint32_t t) {
    for (uint32_t j = t; j < d; j += blk.n_threads)
      store_f32(x + j, to_f32(x[j]) * inv * (weight ? weight[j] : 1.0f));
  });
}

}  // namespace pith::cuda::kern
