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

template <class Block, class T>
PITH_HD void add_rmsnorm_body(const Block& blk, NormShared& sh, float* residual_all,
                              const float* delta_all, const float* weight, uint32_t d, float eps,
                              T* out_all) {
  size_t row = blk.block_x;
  float* residual = residual_all + row * d;
  const float* delta = delta_all ? delta_all + row * d : nullptr;
  T* out = out_all + row * d;
  blk.threads([&](uint32_t t) {
    float ss = 0;
    for (uint32_t j = t; j < d; j += kNormThreads) {
      float r = residual[j];
      if (delta) {
        r += delta[j];
        residual[j] = r;
      }
      ss += r * r;
    }
    sh.partial[t] = ss;
  });
  blk.reduce_sum(sh.partial);
  float inv = 1.0f / sqrtf(sh.partial[0] / static_cast<float>(d) + eps);
  blk.threads([&](uint32_t t) {
    for (uint32_t j = t; j < d; j += kNormThreads)
      store_f32(out + j, residual[j] * inv * weight[j]);
  });
}

}  // namespace pith::cuda::kern
