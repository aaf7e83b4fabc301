// Matrix products against model weights: the compute core of every forward pass.
//
// Weights are stored [rows = out_features][cols = in_features], each row contiguous, in their
// file dtype (f32, f16, bf16, q8_0, q4_0); activations are f32 [n_tokens][cols], outputs f32
// [n_tokens][rows]. Accumulation is always f32.
//
// The implementation picks a path by n_tokens: few tokens (decode) is bound by weight-read
// bandwidth; many tokens (prefill, big decode batches) by arithmetic, so it tiles the weights
// so that each loaded weight is reused across tokens.
#pragma once

#include <cstddef>

#include "common/thread_pool.h"
#include "engine/dtype.h"

namespace pith {

struct WeightMatrix {
  DType dtype = DType::F32;
  size_t rows = 0;  // out features
  size_t cols = 0;  // in features (multiple of the dtype's block size)
  const void* data = nullptr;
  size_t row_bytes() const { return pith::row_bytes(dtype, cols); }
  const uint8_t* row(size_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
};

// y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tokens, o < w.rows.
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y);

// Slow, obviously correct version (dequantise each row, f64 accumulate): the parity reference
// for the optimised kernels in tests.
void matmul_reference(const WeightMatrix& w, const float* x, size_t n_tokens, float* y);

// Converts one row of `n` elements (a multiple of the block size) to f32.
void dequantize_row(DType dtype, const void* src, float* dst, size_t n);

}  // namespace pith
