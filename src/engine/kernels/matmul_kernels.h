// Internal to engine/kernels: the per-ISA matmul entry points that matmul.cpp dispatches to,
// and the activation formats they share.
//
// Activations are converted once per matmul to the weight's "dot type" (as llama.cpp does,
// which also makes pith's logits track llama.cpp's more closely):
//   F32, F16 weights: f32 activations as given.
//   BF16 weights:     activations rounded to bf16 (round to nearest even), kept as f32 values.
//   Q8_0, Q4_0:       activations quantised per 32-block to int8 with a scale
//                     d = fp16(amax / 127), q = round_half_even(x / d); integer dot products.
// Every ISA path computes the same math, so paths differ only by f32 summation order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "engine/kernels/matmul.h"

namespace pith::kernels {

// One 32-element block of quantised activations.
struct ActQ8 {
  float d;  // scale (an fp16 value, widened)
  int8_t qs[32];
};
static_assert(sizeof(ActQ8) == 36);

// Prepared activations for one matmul: `q8` for Q8_0/Q4_0 weights ([n_tokens][cols/32]
// blocks), otherwise `f32` ([n_tokens][cols], possibly bf16-rounded), plus `bf16`
// ([n_tokens][cols]) for the AVX512_BF16 kernel.
struct PreparedActs {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;  // BF16 weights on AVX512_BF16 CPUs: the same values packed
  const ActQ8* q8 = nullptr;
  size_t blocks_per_token = 0;
};

// Scalar quantisation of one row of activations (n a multiple of 32); the reference for the
// SIMD versions, which must give identical blocks.
void quantize_act_q8_scalar(const float* x, ActQ8* out, size_t n);

void matmul_scalar(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                   float* y);
void matmul_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                 float* y);
void quantize_act_q8_avx2(const float* x, ActQ8* out, size_t n);
// The packed f32 GEMM behind matmul_avx2 for many tokens (gemm_avx2.cpp); x is f32 in the
// weight's dot type.
void gemm_avx2(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y);
void matmul_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                   size_t n_tokens, float* y);

}  // namespace pith::kernels
