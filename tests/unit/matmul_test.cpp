// Parity of the optimised matmul against the slow reference, for every dtype and for token
// counts on both sides of the decode / prefill path switch.
#include "engine/kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/fp16.h"

namespace pith {

namespace {

// Random weights in `dtype`, built by quantising f32 draws the way model files store them.
std::vector<uint8_t> make_weights(DType dtype, size_t rows, size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<uint8_t> out(rows * row_bytes(dtype, cols));
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* dst = out.data() + r * row_bytes(dtype, cols);
    std::vector<float> v(cols);
    for (auto& x : v) x = nd(rng);
    switch (dtype) {
      case DType::F32: std::memcpy(dst, v.data(), cols * 4); break;
      case DType::F16:
        for (size_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v[i]);
        break;
      case DType::BF16:
        for (size_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(v[i]);
        break;
      case DType::Q8_0:
        for (size_t b = 0; b < cols / 32; ++b) {
          auto* blk = reinterpret_cast<BlockQ8_0*>(dst) + b;
          float amax = 0;
          for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[b * 32 + j]));
          float d = amax / 127;
          blk->d = f32_to_f16(d);
          for (size_t j = 0; j < 32; ++j)
            blk->qs[j] = static_cast<int8_t>(d == 0 ? 0 : std::lround(v[b * 32 + j] / d));
        }
        break;
      case DType::Q4_0:
        for (size_t b = 0; b < cols / 32; ++b) {
          auto* blk = reinterpret_cast<BlockQ4_0*>(dst) + b;
          blk->d = f32_to_f16(0.1f);
          for (size_t j = 0; j < 16; ++j) blk->qs[j] = static_cast<uint8_t>(rng() & 0xff);
        }
        break;
    }
  }
  return out;
}

}  // namespace

class MatmulParity : public ::testing::TestWithParam<std::tuple<DType, size_t>> {};

TEST_P(MatmulParity, MatchesReference) {
  auto [dtype, n_tokens] = GetParam();
  std::mt19937 rng(42);
  const size_t rows = 96, cols = 256;
  auto wbytes = make_weights(dtype, rows, cols, rng);
  WeightMatrix w{dtype, rows, cols, wbytes.data()};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n_tokens * cols);
  for (auto& v : x) v = nd(rng);

  std::vector<float> want(n_tokens * rows), got(n_tokens * rows);
  matmul_reference(w, x.data(), n_tokens, want.data());
  ThreadPool pool(2);
  matmul(pool, w, x.data(), n_tokens, got.data());
  // Tolerance: quantised-activation paths (q8_0/bf16 dot products) may round activations,
  // giving ~1% relative error on a dot product of 256 terms.
  double tol = (dtype == DType::F32 || dtype == DType::F16) ? 1e-4 : 3e-2;
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 1.0 + std::fabs(want[i]);
    ASSERT_NEAR(got[i] / scale, want[i] / scale, tol) << "i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, MatmulParity,
    ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                       ::testing::Values(size_t{1}, size_t{3}, size_t{8}, size_t{33})));

}  // namespace pith
