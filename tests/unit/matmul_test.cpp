// Parity of the optimised matmul against the slow reference, for every dtype, every kernel ISA
// this CPU supports, odd shapes, and token counts on both sides of the decode / prefill path
// switch (and of the register tiles' ragged edges). Also: the ISA paths agree with each other
// to f32 rounding (same math), SIMD activation quantisation is bit-identical to the scalar one,
// and bad input is a pith::Error.
#include "engine/kernels/matmul.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/lm_head.h"
#include "engine/token_distribution.h"
#include "formats/iquants.h"
#include "formats/kquants.h"
#include "formats/legacy_quants.h"
#include "formats/mxfp4.h"

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
      case DType::F32:
        std::memcpy(dst, v.data(), cols * 4);
        break;
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
      case DType::Q4_1:
        quantize_q4_1(v.data(), reinterpret_cast<BlockQ4_1*>(dst), cols);
        break;
      case DType::Q5_0:
        quantize_q5_0(v.data(), reinterpret_cast<BlockQ5_0*>(dst), cols);
        break;
      case DType::Q5_1:
        quantize_q5_1(v.data(), reinterpret_cast<BlockQ5_1*>(dst), cols);
        break;
      case DType::Q2_K:
        quantize_q2_k(v.data(), reinterpret_cast<BlockQ2_K*>(dst), cols);
        break;
      case DType::Q3_K:
        quantize_q3_k(v.data(), reinterpret_cast<BlockQ3_K*>(dst), cols);
        break;
      case DType::Q4_K:
        quantize_q4_k(v.data(), reinterpret_cast<BlockQ4_K*>(dst), cols);
        break;
      case DType::Q5_K:
        quantize_q5_k(v.data(), reinterpret_cast<BlockQ5_K*>(dst), cols);
        break;
      case DType::Q6_K:
        quantize_q6_k(v.data(), reinterpret_cast<BlockQ6_K*>(dst), cols);
        break;
      case DType::IQ4_NL:
        quantize_iq4_nl(v.data(), reinterpret_cast<BlockIQ4_NL*>(dst), cols);
        break;
      case DType::IQ4_XS:
        quantize_iq4_xs(v.data(), reinterpret_cast<BlockIQ4_XS*>(dst), cols);
        break;
      case DType::MXFP4:
        quantize_mxfp4(v.data(), reinterpret_cast<BlockMXFP4*>(dst), cols);
        break;
    }
  }
  return out;
}

std::vector<float> make_acts(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

std::vector<KernelIsa> supported_isas() {
  std::vector<KernelIsa> out;
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

// Tolerance against the f64 reference, relative to |w_row|·|x_t| (which bounds the sum of
// |products|, so it is the natural scale of summation and activation-rounding error).
// bf16 rounding moves each activation by ≤ 2^-9 relative; int8 block quantisation by
// ≤ amax/254: both well under 1e-2 of that scale.
double tolerance(DType dtype) {
  return (dtype == DType::F32 || dtype == DType::F16) ? 1e-5 : 1e-2;
}

// Between kernel paths: f32 summation order only (every quantised path, the AVX2 integer GEMM
// included, takes Q4_1/Q5_1's offset term from the fp16-rounded activation sum, ggml's q8_1).
double vs_scalar_tolerance(DType) {
  return 1e-6;
}

// scale[t * rows + o] = |W row o| · |x row t|
std::vector<double> output_scales(const WeightMatrix& w, const float* x, size_t n_tokens) {
  std::vector<float> row(w.cols);
  std::vector<double> wn(w.rows), out(n_tokens * w.rows);
  for (size_t o = 0; o < w.rows; ++o) {
    dequantize_row(w.dtype, w.row(o), row.data(), w.cols);
    for (float v : row) wn[o] += double(v) * v;
  }
  for (size_t t = 0; t < n_tokens; ++t) {
    double xn = 0;
    for (size_t i = 0; i < w.cols; ++i) xn += double(x[t * w.cols + i]) * x[t * w.cols + i];
    for (size_t o = 0; o < w.rows; ++o) out[t * w.rows + o] = std::sqrt(wn[o] * xn) + 1e-30;
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<double>& scale, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i] / scale[i], want[i] / scale[i], tol) << what << " i=" << i;
}

struct Shape {
  size_t rows, cols;
};

}  // namespace

class MatmulParity : public ::testing::TestWithParam<std::tuple<DType, size_t, Shape>> {};

TEST_P(MatmulParity, EveryIsaMatchesReference) {
  auto [dtype, n_tokens, shape] = GetParam();
  const size_t block = dtype_info(dtype).block_size;
  const size_t cols = (shape.cols + block - 1) / block * block;
  std::mt19937 rng(42 + n_tokens);
  auto wbytes = make_weights(dtype, shape.rows, cols, rng);
  WeightMatrix w{dtype, shape.rows, cols, wbytes.data()};
  auto x = make_acts(n_tokens * cols, rng);

  std::vector<float> want(n_tokens * shape.rows);
  matmul_reference(w, x.data(), n_tokens, want.data());
  const auto scale = output_scales(w, x.data(), n_tokens);
  ThreadPool pool(2);
  std::vector<float> scalar_out;
  for (KernelIsa isa : supported_isas()) {
    std::vector<float> got(n_tokens * shape.rows, -1.0f);
    matmul(pool, w, x.data(), n_tokens, got.data(), isa);
    std::string what = std::string(isa_name(isa)) + " " + std::string(dtype_info(dtype).name);
    expect_close(got, want, scale, tolerance(dtype), what);
    // Every path does the same math (same activation rounding), so they agree far more
    // tightly with each other than with the reference.
    if (isa == KernelIsa::Scalar)
      scalar_out = got;
    else
      expect_close(got, scalar_out, scale, vs_scalar_tolerance(dtype), what + " vs scalar");
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, MatmulParity,
    ::testing::Combine(
        ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                          DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                          DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                          DType::MXFP4),
        ::testing::Values(size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{8}, size_t{33},
                          size_t{64}, size_t{70}, size_t{100}, size_t{130}),
        ::testing::Values(Shape{96, 256}, Shape{37, 96}, Shape{5, 33}, Shape{130, 520})));

TEST(Matmul, DefaultOverloadUsesBestIsa) {
  std::mt19937 rng(7);
  auto wbytes = make_weights(DType::Q8_0, 40, 64, rng);
  WeightMatrix w{DType::Q8_0, 40, 64, wbytes.data()};
  auto x = make_acts(5 * 64, rng);
  std::vector<float> a(5 * 40), b(5 * 40);
  ThreadPool pool(2);
  matmul(pool, w, x.data(), 5, a.data());
  matmul(pool, w, x.data(), 5, b.data(), best_isa());
  EXPECT_EQ(a, b);
}

TEST(Matmul, SingleThreadPoolGivesSameResult) {
  std::mt19937 rng(8);
  auto wbytes = make_weights(DType::BF16, 70, 128, rng);
  WeightMatrix w{DType::BF16, 70, 128, wbytes.data()};
  auto x = make_acts(9 * 128, rng);
  std::vector<float> a(9 * 70), b(9 * 70);
  ThreadPool one(1), two(3);
  matmul(one, w, x.data(), 9, a.data());
  matmul(two, w, x.data(), 9, b.data());
  EXPECT_EQ(a, b);  // each output is computed by one thread in a fixed order
}

// Decode (1-2 tokens) splits the rows into byte-sized tasks and streams quantised rows one at
// a time; a ragged row count across many tasks and thread counts must still give every row,
// exactly as the scalar kernel does.
TEST(Matmul, DecodeRowTasksCoverEveryRow) {
  std::mt19937 rng(10);
  const size_t rows = 1030;
  for (DType dt :
       {DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::BF16, DType::F32, DType::Q2_K, DType::Q3_K,
        DType::Q4_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
    const size_t cols = std::max<size_t>(64, dtype_info(dt).block_size);
    auto wbytes = make_weights(dt, rows, cols, rng);
    WeightMatrix w{dt, rows, cols, wbytes.data()};
    for (size_t n : {size_t{1}, size_t{2}}) {
      auto x = make_acts(n * cols, rng);
      ThreadPool one(1);
      std::vector<float> want(n * rows);
      matmul(one, w, x.data(), n, want.data(), KernelIsa::Scalar);
      const auto scale = output_scales(w, x.data(), n);
      for (size_t threads : {size_t{1}, size_t{2}, size_t{3}}) {
        ThreadPool pool(threads);
        std::vector<float> got(n * rows, NAN);
        matmul(pool, w, x.data(), n, got.data());
        expect_close(got, want, scale, 1e-6,
                     std::string(dtype_info(dt).name) + " n=" + std::to_string(n) +
                         " threads=" + std::to_string(threads));
      }
    }
  }
}

TEST(Matmul, QuantisedActivationsSimdMatchScalarExactly) {
  if (!isa_supported(KernelIsa::Avx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(9);
  auto x = make_acts(32 * 40, rng);
  // Edge blocks: all zero, a single huge value, exact .5 multiples after scaling.
  for (size_t j = 0; j < 32; ++j) x[j] = 0.0f;
  x[32] = 1e30f;
  for (size_t j = 0; j < 32; ++j) x[64 + j] = (j % 2 ? 0.5f : -1.5f) * 127.0f / 127.0f;
  x[64] = 127.0f;
  std::vector<kernels::ActQ8> a(40), b(40);
  kernels::quantize_act_q8_scalar(x.data(), a.data(), x.size());
  kernels::quantize_act_q8_avx2(x.data(), b.data(), x.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].d, b[i].d) << "block " << i;
    EXPECT_EQ(0, std::memcmp(a[i].qs, b[i].qs, 32)) << "block " << i;
    // s: the block sum times the unrounded scale, rounded to fp16 (ggml's q8_1).
    int32_t sum = 0;
    for (int8_t q : a[i].qs) sum += q;
    EXPECT_EQ(a[i].s, b[i].s) << "block " << i;
    if (std::isfinite(a[i].d)) {  // (the 1e30 block's fp16 scale is inf)
      EXPECT_NEAR(a[i].s, a[i].d * sum, std::fabs(a[i].d * sum) * 2e-3) << "block " << i;
    }
  }
  EXPECT_EQ(a[0].d, 0.0f);
  EXPECT_EQ(a[2].qs[0], 127);
  EXPECT_EQ(a[2].qs[1], 0);  // 0.5 rounds half to even
}

// K-quant activations: every block's d keeps 16 significant bits (so d * q is exact), the
// quants reproduce x within half a step, bsums are the sums of each 16 quants, and the AVX2
// version gives the same bytes.
TEST(Matmul, KQuantActivationBlocks) {
  std::mt19937 rng(11);
  auto x = make_acts(3 * 256, rng);
  for (size_t j = 0; j < 256; ++j) x[256 + j] = 0.0f;  // an all-zero block
  x[600] = 1e6f;                                       // a block dominated by one value
  std::vector<kernels::ActQ8K> a(3);
  kernels::quantize_act_q8k(x.data(), a.data(), x.size());
  EXPECT_EQ(a[1].d, 0.0f);
  for (size_t b = 0; b < 3; ++b) {
    uint32_t bits;
    std::memcpy(&bits, &a[b].d, 4);
    EXPECT_EQ(bits & 0xffu, 0u) << "block " << b;
    for (size_t g = 0; g < 16; ++g) {
      int sum = 0;
      for (size_t i = 0; i < 16; ++i) sum += a[b].qs[16 * g + i];
      EXPECT_EQ(a[b].bsums[g], sum);
    }
    for (size_t i = 0; i < 256; ++i)
      ASSERT_LE(std::fabs(a[b].d * a[b].qs[i] - x[b * 256 + i]), 0.5f * a[b].d * 1.0001f + 1e-30f)
          << "block " << b << " i=" << i;
  }
  EXPECT_EQ(a[2].qs[600 - 512], 127);
  if (isa_supported(KernelIsa::Avx2)) {
    // Values near .5 multiples of the step.
    for (size_t j = 0; j < 256; ++j) x[j] = (float(j % 7) - 3.0f) * 0.5f * (4.0f / 127.0f);
    x[0] = 4.0f;
    kernels::quantize_act_q8k(x.data(), a.data(), x.size());
    std::vector<kernels::ActQ8K> b(3);
    kernels::quantize_act_q8k_avx2(x.data(), b.data(), x.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 3 * sizeof(kernels::ActQ8K)));
  }
}

TEST(Matmul, BadInputIsAnError) {
  std::vector<uint8_t> data(34 * 4);
  float x[64] = {}, y[4] = {};
  ThreadPool pool(1);
  WeightMatrix odd{DType::Q8_0, 2, 48, data.data()};  // 48 is not a multiple of 32
  EXPECT_THROW(matmul(pool, odd, x, 1, y), Error);
  WeightMatrix odd_k{DType::Q4_K, 1, 64, data.data()};  // 64 is not a multiple of 256
  EXPECT_THROW(matmul(pool, odd_k, x, 1, y), Error);
  WeightMatrix null_data{DType::F32, 2, 8, nullptr};
  EXPECT_THROW(matmul(pool, null_data, x, 1, y), Error);
  ScopedIsaCap cap(KernelIsa::Avx2);  // AVX-512 unsupported on any host
  WeightMatrix ok{DType::F32, 2, 8, data.data()};
  EXPECT_THROW(matmul(pool, ok, x, 1, y, KernelIsa::Avx512), Error);
}

TEST(Matmul, ZeroTokensWritesNothing) {
  std::vector<float> wdata(8 * 4, 1.0f);
  WeightMatrix w{DType::F32, 4, 8, wdata.data()};
  float y[4] = {5, 5, 5, 5};
  ThreadPool pool(2);
  matmul(pool, w, nullptr, 0, y);
  EXPECT_EQ(y[0], 5.0f);
}

// The AVX-512 panel GEMMs (weights repacked into 16-row panels: vpdpbusd for the quants,
// vdpbf16ps for BF16) against the kernels they replace for many tokens (the register tiles;
// the AVX2 rows for K-quants): same math up to f32 summation order, on row counts that leave
// partial panels and tasks, token counts that leave partial micro-tiles, and Q8_0 quants over
// the whole int8 range (-128 included, which the q + 128 trick must keep exact). The output
// buffers are exact in size, so a padded row stored past the end is a sanitizer error.
TEST(Matmul, PanelGemmMatchesTheTiles) {
  if (!isa_supported(KernelIsa::Avx512)) GTEST_SKIP() << "no AVX-512";
  const size_t gemm_from = kernels::panel_gemm_min_tokens();
  ASSERT_GT(gemm_from, 0u);
  std::mt19937 rng(31);
  ThreadPool pool(2);
  size_t cases = 0;
  for (DType dt : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                   DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::BF16, DType::IQ4_NL,
                   DType::IQ4_XS, DType::MXFP4}) {
    for (auto [rows, min_cols] : {std::pair<size_t, size_t>{1, 32},
                                  {15, 96},
                                  {17, 64},
                                  {33, 160},
                                  {69, 256},
                                  {130, 2048}}) {
      const size_t block = std::max<size_t>(32, dtype_info(dt).block_size);
      const size_t cols = (min_cols + block - 1) / block * block;
      auto wbytes = make_weights(dt, rows, cols, rng);
      if (dt == DType::Q8_0)
        for (size_t r = 0; r < rows; ++r) {
          auto* blocks = reinterpret_cast<BlockQ8_0*>(wbytes.data() + r * row_bytes(dt, cols));
          for (size_t b = 0; b < cols / 32; ++b)
            for (int8_t& q : blocks[b].qs) q = static_cast<int8_t>(rng() & 0xff);
        }
      WeightMatrix w{dt, rows, cols, wbytes.data()};
      const size_t first = 8 * gemm_from;                 // where every dtype takes its GEMM
      if (!kernels::uses_panel_gemm(w, first)) continue;  // this CPU lacks VNNI or BF16
      ++cases;
      for (size_t n : {first, first + 1, first + 7, size_t{70}}) {
        auto x = make_acts(n * cols, rng);
        std::vector<float> gemm(n * rows), tiles(n * rows);
        matmul(pool, w, x.data(), n, gemm.data(), KernelIsa::Avx512);
        kernels::set_panel_gemm_min_tokens(0);
        matmul(pool, w, x.data(), n, tiles.data(), KernelIsa::Avx512);
        kernels::set_panel_gemm_min_tokens(gemm_from);
        std::vector<float> want(n * rows);
        matmul_reference(w, x.data(), n, want.data());
        const std::string what = fmt::format("{} {}x{} n={}", dtype_info(dt).name, rows, cols, n);
        const auto scale = output_scales(w, x.data(), n);
        expect_close(gemm, want, scale, tolerance(dt), what);
        expect_close(gemm, tiles, scale, vs_scalar_tolerance(dt), what + " vs tiles");
      }
    }
  }
  if (cases == 0) GTEST_SKIP() << "no AVX512_VNNI or AVX512_BF16";
}

// y = w x gathered from matmul_blocks' row blocks ([n][w.rows]; NaN where no block wrote).
std::vector<float> blocks_of(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n) {
  std::vector<float> y(n * w.rows, NAN);
  std::mutex mu;
  matmul_blocks(pool, w, x, n, [&](const MatmulBlock& b) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t t = 0; t < b.n_tokens; ++t)
      for (size_t r = 0; r < b.n_rows; ++r)
        y[(b.t0 + t) * w.rows + b.r0 + r] = b.y[t * b.n_rows + r];
  });
  return y;
}

// Panels packed once at load (WeightMatrix::panels: Q8_0, BF16, Q4_K and the 4/5-bit 32-block
// types and IQ4_NL/IQ4_XS as nibbles) serve every token count,
// decode included, through matmul and through matmul_blocks' row blocks, with the same math as
// the tiles that read the rows.
TEST(Matmul, LoadTimePanelsServeEveryTokenCount) {
  if (!isa_supported(KernelIsa::Avx512)) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(32);
  ThreadPool pool(2);
  size_t cases = 0;
  for (DType dt : {DType::Q8_0, DType::BF16, DType::Q4_K, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                   DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
    const size_t rows = 2 * kMatmulBlockRows + 37,
                 cols = dtype_info(dt).block_size == 256 ? 512 : 96;
    auto wbytes = make_weights(dt, rows, cols, rng);
    WeightMatrix w{dt, rows, cols, wbytes.data()};
    auto panels = pack_weight_panels(pool, w);
    EXPECT_EQ(weight_panels_apply(w), panels != nullptr) << dtype_info(dt).name;
    if (!panels) continue;  // this CPU lacks VNNI or BF16
    ++cases;
    WeightMatrix packed = w;
    packed.panels = panels.get();
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{9}, size_t{130}}) {
      ASSERT_TRUE(kernels::uses_panel_gemm(packed, n));
      auto x = make_acts(n * cols, rng);
      std::vector<float> got(n * rows), tiles(n * rows);
      matmul(pool, packed, x.data(), n, got.data());
      const size_t gemm_from = kernels::panel_gemm_min_tokens();
      kernels::set_panel_gemm_min_tokens(0);
      matmul(pool, w, x.data(), n, tiles.data());
      kernels::set_panel_gemm_min_tokens(gemm_from);
      const std::string what = fmt::format("{} n={}", dtype_info(dt).name, n);
      expect_close(got, tiles, output_scales(w, x.data(), n), vs_scalar_tolerance(dt),
                   what + " vs tiles");
      const std::vector<float> blocks = blocks_of(pool, packed, x.data(), n);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(blocks[i], got[i]) << what << " i=" << i;
    }
  }
  if (cases == 0) GTEST_SKIP() << "no AVX512_VNNI or AVX512_BF16";
  DType none = DType::Q6_K;  // its panels were slower to stream than its rows
  auto wbytes = make_weights(none, 16, 256, rng);
  EXPECT_EQ(pack_weight_panels(pool, WeightMatrix{none, 16, 256, wbytes.data()}), nullptr);
}

// AVX2 decodes Q4_K and BF16 from panels packed at load (gemv_panels_avx2.cpp, the layouts the
// AVX-512 kernels read) for 1-4 tokens: against the row kernels they replace and the scalar
// reference, on a row count that leaves a partial panel (its padded rows must not be stored:
// the outputs are exact in size) and an odd panel count, through matmul_blocks bit for bit,
// and for Q4_K, where the CPU has AVX512_VNNI, bit for bit against the VNNI kernel on the same
// panels (same integer sums, same f32 steps).
TEST(Matmul, Avx2PanelsDecode) {
  if (!isa_supported(KernelIsa::Avx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(33);
  ThreadPool pool(2);
  for (DType dt : {DType::Q4_K, DType::BF16})
    for (size_t cols : {size_t{256}, size_t{2048}}) {
      const size_t rows = 2 * kMatmulBlockRows + 37;
      auto wbytes = make_weights(dt, rows, cols, rng);
      const WeightMatrix w{dt, rows, cols, wbytes.data()};
      std::shared_ptr<const void> panels;
      {
        ScopedIsaCap cap(KernelIsa::Avx2);
        panels = pack_weight_panels(pool, w);
        EXPECT_TRUE(weight_panels_apply(w));
        EXPECT_FALSE(weight_panels_apply(WeightMatrix{DType::Q6_K, 16, 256, wbytes.data()}));
      }
      ASSERT_NE(panels, nullptr);
      WeightMatrix packed = w;
      packed.panels = panels.get();
      for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
        ASSERT_TRUE(kernels::uses_avx2_panels(packed, n));
        auto x = make_acts(n * cols, rng);
        std::vector<float> got(n * rows), rows_out(n * rows), want(n * rows);
        matmul(pool, packed, x.data(), n, got.data(), KernelIsa::Avx2);
        matmul(pool, w, x.data(), n, rows_out.data(), KernelIsa::Avx2);
        matmul_reference(w, x.data(), n, want.data());
        const std::string what = fmt::format("{} {}x{} n={}", dtype_info(dt).name, rows, cols, n);
        const auto scale = output_scales(w, x.data(), n);
        expect_close(got, want, scale, tolerance(dt), what);
        expect_close(got, rows_out, scale, vs_scalar_tolerance(dt), what + " vs rows");
        std::vector<float> blocks;
        {
          ScopedIsaCap cap(KernelIsa::Avx2);
          blocks = blocks_of(pool, packed, x.data(), n);
        }
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(blocks[i], got[i]) << what << " i=" << i;
        if (dt == DType::Q4_K && isa_supported(KernelIsa::Avx512) &&
            kernels::uses_panel_gemm(packed, n)) {
          std::vector<float> vnni(n * rows);
          matmul(pool, packed, x.data(), n, vnni.data(), KernelIsa::Avx512);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(vnni[i], got[i]) << what << " vs VNNI, i=" << i;
        }
      }
      EXPECT_FALSE(kernels::uses_avx2_panels(packed, kernels::kPanelMaxTokens + 1));
    }
}

// matmul_blocks hands out every (row block, token chunk) exactly once, with the same values
// as matmul (same kernels, so bit-identical), across token counts on both sides of the
// tile/GEMM switch and of the 128-token chunk, and a row count that is not a block multiple.
// Under every kernel level the host has (the AVX2 one keeps per-call activation state for the
// blocks: its f32 GEMM packing, the K-quants' integer GEMM).
TEST(Matmul, BlocksMatchMatmulExactly) {
  std::mt19937 rng(21);
  ThreadPool pool(2);
  const size_t rows = 2 * kMatmulBlockRows + 37;
  for (KernelIsa isa : supported_isas())
    for (DType dt : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_1, DType::Q4_K, DType::Q5_K,
                     DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
      ScopedIsaCap cap(isa);
      const size_t cols = std::max<size_t>(64, dtype_info(dt).block_size);
      auto wdata = make_weights(dt, rows, cols, rng);
      WeightMatrix w{dt, rows, cols, wdata.data()};
      for (size_t n : {size_t{1}, size_t{5}, size_t{30}, size_t{200}}) {
        auto x = make_acts(n * cols, rng);
        std::vector<float> ref(n * rows), got(n * rows, NAN);
        std::vector<int> seen(n * rows, 0);
        matmul(pool, w, x.data(), n, ref.data());
        std::mutex mu;
        matmul_blocks(pool, w, x.data(), n, [&](const MatmulBlock& b) {
          ASSERT_LT(b.worker, pool.size());
          std::lock_guard<std::mutex> lock(mu);
          for (size_t t = 0; t < b.n_tokens; ++t)
            for (size_t r = 0; r < b.n_rows; ++r) {
              got[(b.t0 + t) * rows + b.r0 + r] = b.y[t * b.n_rows + r];
              ++seen[(b.t0 + t) * rows + b.r0 + r];
            }
        });
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_EQ(seen[i], 1) << isa_name(isa) << " " << dtype_info(dt).name << " n=" << n
                                << " i=" << i;
          ASSERT_EQ(got[i], ref[i])
              << isa_name(isa) << " " << dtype_info(dt).name << " n=" << n << " i=" << i;
        }
      }
    }
}

// The fused LM head gives what matmul + top_k_distribution give on the materialised logits.
TEST(Matmul, FusedLmHeadMatchesUnfused) {
  std::mt19937 rng(5);
  const size_t vocab = 5 * kMatmulBlockRows + 11, cols = 96;
  auto wdata = make_weights(DType::BF16, vocab, cols, rng);
  WeightMatrix w{DType::BF16, vocab, cols, wdata.data()};
  for (size_t threads : {size_t{1}, size_t{2}}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{1}, size_t{40}}) {
      auto h = make_acts(n * cols, rng);
      std::vector<uint32_t> ks(n);
      for (size_t r = 0; r < n; ++r) ks[r] = r % 3 == 0 ? 1 : (r % 3 == 1 ? 50 : 100000);
      // Token masks on every other row, each allowing a different sparse set.
      std::vector<TokenMask> masks(n, TokenMask((vocab + 63) / 64, 0));
      std::vector<const uint64_t*> allowed(n, nullptr);
      for (size_t r = 1; r < n; r += 2) {
        for (size_t i = r; i < vocab; i += 3 + r) masks[r][i / 64] |= uint64_t{1} << (i % 64);
        allowed[r] = masks[r].data();
      }
      // Logit adjustments on every third row (some with masks too): tokens spread over the
      // blocks, at block edges and the vocabulary's last token.
      std::vector<LogitAdjustments> adjusts(n);
      std::vector<const LogitAdjustments*> adjust(n, nullptr);
      for (size_t r = 0; r < n; r += 3) {
        for (size_t i = r % 7; i < vocab; i += 97 + r)
          adjusts[r].push_back(
              {static_cast<uint32_t>(i), 3.0f, 1.5f, i % 2 ? kLogitBanPenalty : 0});
        for (size_t edge : {kMatmulBlockRows - 1, kMatmulBlockRows, vocab - 1})
          if (std::none_of(adjusts[r].begin(), adjusts[r].end(),
                           [&](const LogitAdjustment& a) { return a.token == edge; }))
            adjusts[r].push_back({static_cast<uint32_t>(edge), 50.0f, 1, 0});
        std::sort(
            adjusts[r].begin(), adjusts[r].end(),
            [](const LogitAdjustment& a, const LogitAdjustment& b) { return a.token < b.token; });
        adjust[r] = &adjusts[r];
      }
      std::vector<TokenDistribution> got(n);
      LmHeadScratch scratch;
      lm_head_top_k(pool, w, h.data(), n, ks.data(), scratch, got.data(), 0, allowed.data(),
                    adjust.data());
      std::vector<float> logits(n * vocab);
      matmul(pool, w, h.data(), n, logits.data());
      for (size_t r = 0; r < n; ++r) {
        const TokenDistribution ref =
            top_k_distribution(logits.data() + r * vocab, vocab, ks[r], allowed[r], adjust[r]);
        ASSERT_EQ(got[r].ids, ref.ids) << "row " << r;
        for (size_t i = 0; i < ref.probs.size(); ++i)
          ASSERT_NEAR(got[r].probs[i], ref.probs[i], 1e-6f * ref.probs[i] + 1e-12f);
      }
    }
  }
}

TEST(Matmul, WeightPanelsAreSkippedPastEightyPercentOfMemory) {
  constexpr size_t GiB = size_t{1} << 30;
  EXPECT_TRUE(weight_panels_fit(4 * GiB, 4 * GiB, 16 * GiB));
  EXPECT_TRUE(weight_panels_fit(6 * GiB, 4 * GiB, 16 * GiB));  // 10 of 12.8 GiB
  EXPECT_FALSE(weight_panels_fit(8 * GiB, 8 * GiB, 16 * GiB));
  EXPECT_FALSE(weight_panels_fit(7 * GiB, 7 * GiB, 16 * GiB));  // 14 > 12.8
  EXPECT_TRUE(weight_panels_fit(8 * GiB, 8 * GiB, 20 * GiB));   // exactly 80 %
  EXPECT_FALSE(weight_panels_fit(8 * GiB, 8 * GiB + 1, 20 * GiB));
  EXPECT_TRUE(weight_panels_fit(100 * GiB, 100 * GiB, 0));  // memory unknown: no guess
}

}  // namespace pith
