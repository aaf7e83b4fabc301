// The skinny BF16 GEMM's body (src/engine/cuda/kernels/gemv_body.h) run on the CPU over every
// block of its grid, against a float64 reference of the same BF16 inputs: every activation-row
// count it takes (1..8), rows that leave the last block part empty, column counts that end
// inside a lane's group of four vectors or inside the warp's first pass, F32 and BF16 outputs
// with a row stride wider than the matrix. Also the warp butterfly it reduces with, against
// the block reduction's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_kernels_host_util.h"
#include "engine/cuda/kernels/gemv_body.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class Out>
void check_gemv(uint32_t rows, uint32_t cols, size_t ldy) {
  const std::vector<Bf16> w = to_bf16(random_floats(size_t{rows} * cols, rows + cols));
  const std::vector<Bf16> x = to_bf16(random_floats(size_t{N} * cols, 7 * cols + N));
  std::vector<Out> y(N * ldy);
  for (Out& v : y) kern::store_f32(&v, -12345.0f);  // untouched columns keep it
  const float sentinel = f(y[0]);
  const uint32_t blocks = kern::ceil_div(rows, kern::kGemvRowsPerBlock);
  auto sh = std::make_unique<kern::GemvShared>();
  for (uint32_t b = 0; b < blocks; ++b)
    kern::gemv_block<N>(kern::HostBlock{b, 0, kern::kGemvThreads}, *sh, w.data(), rows, cols,
                        x.data(), y.data(), ldy);
  for (uint32_t t = 0; t < N; ++t) {
    for (uint32_t o = 0; o < rows; ++o) {
      double want = 0, mag = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        const double p = double(f(w[size_t{o} * cols + c])) * double(f(x[size_t{t} * cols + c]));
        want += p;
        mag += std::fabs(p);
      }
      const float got = f(y[t * ldy + o]);
      // F32 sums in another order: a few ulps of the terms' magnitude; BF16 output: its rounding.
      const double tol = 1e-6 * mag + (sizeof(Out) == 2 ? std::fabs(want) / 128 : 0) + 1e-30;
      ASSERT_NEAR(got, want, tol) << "N=" << N << " rows=" << rows << " cols=" << cols << " t=" << t
                                  << " o=" << o;
    }
    for (size_t o = rows; o < ldy; ++o)
      ASSERT_EQ(f(y[t * ldy + o]), sentinel) << "wrote past the matrix's rows at " << o;
  }
}

template <uint32_t N>
void check_shapes() {
  // cols: one vector per lane and less (8, 200), a pass of 4 x 32 vectors ending mid-group
  // (1032 = 129 vectors), exactly two passes (2048).
  for (uint32_t cols : {8u, 200u, 1032u, 2048u}) {
    check_gemv<N, float>(13, cols, 13);
    check_gemv<N, Bf16>(8, cols, 11);
  }
  check_gemv<N, float>(1, 64, 5);
}

TEST(CudaGemvHost, EveryActivationRowCountMatchesTheFloat64Reference) {
  check_shapes<1>();
  check_shapes<2>();
  check_shapes<3>();
  check_shapes<4>();
  check_shapes<5>();
  check_shapes<6>();
  check_shapes<7>();
  check_shapes<8>();
}

TEST(CudaGemvHost, FitsOnlyAlignedShapesItCovers) {
  alignas(16) static const uint16_t buf[64] = {};
  EXPECT_TRUE(kern::gemv_fits(1, 16, buf, buf));
  EXPECT_TRUE(kern::gemv_fits(8, 2048, buf, buf));
  EXPECT_FALSE(kern::gemv_fits(0, 16, buf, buf));
  EXPECT_FALSE(kern::gemv_fits(9, 16, buf, buf));
  EXPECT_FALSE(kern::gemv_fits(1, 12, buf, buf));      // not whole vectors
  EXPECT_FALSE(kern::gemv_fits(1, 16, buf + 1, buf));  // misaligned weights
  EXPECT_FALSE(kern::gemv_fits(1, 16, buf, buf + 4));  // misaligned inputs
}

// The gated epilogue gives the bits of the unfused path: the GEMV into [N][2 ff] (rounded to the
// output type), then the activation kernel's body over it.
template <uint32_t N, bool kGelu, class Out>
void check_gated(uint32_t ff, uint32_t cols) {
  const std::vector<Bf16> w = to_bf16(random_floats(size_t{2} * ff * cols, ff + cols, 0.3f));
  const std::vector<Bf16> x = to_bf16(random_floats(size_t{N} * cols, cols + N));
  std::vector<Out> gu(size_t{N} * 2 * ff), unfused(size_t{N} * ff), fused(size_t{N} * ff);
  auto sh = std::make_unique<kern::GemvShared>();
  for (uint32_t b = 0; b < kern::ceil_div(2 * ff, kern::kGemvRowsPerBlock); ++b)
    kern::gemv_block<N>(kern::HostBlock{b, 0, kern::kGemvThreads}, *sh, w.data(), 2 * ff, cols,
                        x.data(), gu.data(), 2 * ff);
  run_grid(2, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::swiglu_body<1, kGelu>(bl, nb, t, gu.data(), gu.data() + ff, N, ff, 2 * ff,
                                unfused.data());
  });
  auto gsh = std::make_unique<kern::GemvGatedShared>();
  for (uint32_t b = 0; b < kern::ceil_div(ff, kern::kGemvRowsPerBlock); ++b)
    kern::gemv_gated_block<N, kGelu>(kern::HostBlock{b, 0, kern::kGemvThreads}, *gsh, w.data(), ff,
                                     cols, x.data(), fused.data());
  for (size_t i = 0; i < fused.size(); ++i)
    ASSERT_EQ(f(fused[i]), f(unfused[i])) << "N=" << N << " ff=" << ff << " at " << i;
}

TEST(CudaGemvHost, GatedEpilogueEqualsTheGemvThenTheActivation) {
  check_gated<1, false, Bf16>(40, 200);
  check_gated<3, true, Bf16>(13, 1032);
  check_gated<8, false, float>(24, 64);
  check_gated<2, true, float>(9, 2048);
}

// Each warp's total lands in its first lane, with the bits of the block reduction over a single
// warp (the same butterfly); the other lanes keep their values.
TEST(CudaGemvHost, WarpSumIsTheButterflyOfEachWarp) {
  std::vector<float> v = random_floats(256, 3), orig = v;
  kern::HostBlock{0, 0, 256}.warp_sum(v.data());
  for (uint32_t w = 0; w < 8; ++w) {
    std::vector<float> one(orig.begin() + w * 32, orig.begin() + w * 32 + 32);
    kern::HostBlock{0, 0, 32}.reduce_sum(one.data());
    EXPECT_EQ(v[w * 32], one[0]) << "warp " << w;
    for (uint32_t l = 1; l < 32; ++l) EXPECT_EQ(v[w * 32 + l], orig[w * 32 + l]);
  }
}

}  // namespace
}  // namespace pith::cuda
