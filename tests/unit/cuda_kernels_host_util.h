// Helpers of the tests that run the CUDA kernel bodies on the CPU (cuda_kernels_host_test,
// cuda_family_kernels_host_test): launch grids walked in order, random inputs, BF16 rounding.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "engine/cuda/kernels/block.h"
#include "random_floats.h"

namespace pith::cuda {

using kern::Bf16;

// Every (block, thread) of a 1-D element-wise grid, in order: the launcher's grid, or a small
// one so the grid-stride loop wraps.
template <class F>
inline void run_grid(uint32_t blocks, uint32_t threads, F&& body) {
  for (uint32_t b = 0; b < blocks; ++b)
    for (uint32_t t = 0; t < threads; ++t) body(b, blocks, t);
}

inline std::vector<uint32_t> grids(size_t total, uint32_t threads) {
  return {kern::elementwise_blocks(total, threads), 1, 3};
}

inline std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i].bits = f32_to_bf16(v[i]);
  return out;
}

inline float f(Bf16 x) {
  return bf16_to_f32(x.bits);
}
inline float f(float x) {
  return x;
}

// |a - b| within one BF16 rounding step of the reference (the kernel and the reference may
// round a value that sits near a midpoint differently after f32 arithmetic in another order).
inline void expect_bf16_near(float got, float want, const char* what, size_t i) {
  float ulp = std::ldexp(1.0f, std::ilogb(std::max(std::fabs(want), 1e-30f)) - 7);
  EXPECT_LE(std::fabs(got - want), ulp * 1.01f) << what << " at " << i;
}

}  // namespace pith::cuda
