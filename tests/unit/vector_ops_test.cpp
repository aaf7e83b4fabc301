// The vector helpers of the forward pass, every supported kernel ISA against a float64
// reference written here, over lengths that exercise full vectors and tails; plus the edge
// cases the forward pass relies on (masked -inf in softmax, in-place rmsnorm/swiglu, extreme
// gate values) and errors for empty input.
#include "engine/kernels/vector_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/kernels/cpu_features.h"

namespace pith {

namespace {

std::vector<KernelIsa> isas() {
  std::vector<KernelIsa> out;
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

std::vector<float> randv(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

const size_t kLengths[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 2048, 2051};

}  // namespace

TEST(VectorOps, DotAxpyAddScale) {
  for (KernelIsa isa : isas()) {
    for (size_t n : kLengths) {
      auto a = randv(n, 1), b = randv(n, 2);
      double want = 0, mag = 0;
      for (size_t i = 0; i < n; ++i) {
        want += double(a[i]) * b[i];
        mag += std::fabs(double(a[i]) * b[i]);
      }
      EXPECT_NEAR(dot(a.data(), b.data(), n, isa), want, 1e-6 * mag + 1e-7) << isa_name(isa) << n;

      auto y = b;
      axpy(0.75f, a.data(), y.data(), n, isa);
      for (size_t i = 0; i < n; ++i)  // SIMD uses a fused multiply-add: one rounding fewer
        ASSERT_NEAR(y[i], double(b[i]) + 0.75 * a[i], 1e-6 * (std::fabs(b[i]) + std::fabs(a[i])));

      y = b;
      add(a.data(), y.data(), n, isa);
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], b[i] + a[i]);

      y = a;
      scale(y.data(), -3.0f, n, isa);
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], -3.0f * a[i]);
    }
  }
}

TEST(VectorOps, RmsNormInPlaceAndOutOfPlace) {
  for (KernelIsa isa : isas()) {
    for (size_t n : kLengths) {
      auto x = randv(n, 3, 2.0f), w = randv(n, 4);
      double ss = 0;
      for (float v : x) ss += double(v) * v;
      double inv = 1.0 / std::sqrt(ss / n + 1e-5);
      std::vector<float> y(n);
      rmsnorm(x.data(), w.data(), y.data(), n, 1e-5f, isa);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[i], x[i] * inv * w[i], 1e-5 * (1 + std::fabs(y[i])));
      rmsnorm(x.data(), w.data(), x.data(), n, 1e-5f, isa);
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(x[i], y[i]);
    }
  }
}

TEST(VectorOps, SwiGluIncludingExtremeGates) {
  for (KernelIsa isa : isas()) {
    for (size_t n : kLengths) {
      auto g = randv(n, 5, 3.0f), u = randv(n, 6);
      if (n > 8) {
        g[0] = 100.0f;   // silu(g) = g
        g[1] = -100.0f;  // silu(g) = -0 (exp(100) saturates, no NaN)
        g[2] = -1e30f;
        g[3] = 0.0f;
      }
      std::vector<float> out(n);
      swiglu(g.data(), u.data(), out.data(), n, isa);
      for (size_t i = 0; i < n; ++i) {
        double gd = g[i];
        double want = gd / (1.0 + std::exp(-gd)) * u[i];
        ASSERT_FALSE(std::isnan(out[i])) << i;
        ASSERT_NEAR(out[i], want, 2e-6 * (1 + std::fabs(want)))
            << isa_name(isa) << " n=" << n << " i=" << i;
      }
      swiglu(g.data(), u.data(), g.data(), n, isa);  // in place over gate
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(g[i], out[i]);
    }
  }
}

// gpt-oss's clamped SwiGLU against its definition in double: the gate clamped above at 7, the
// up projection to [-7, 7], then g * sigmoid(1.702 g) * (u + 1); and the family dispatch.
TEST(VectorOps, SwigluOaiClampsAsGptOss) {
  const std::vector<float> gate{-30.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 7.5f, 100.0f},
      up{-9.0f, -7.0f, -0.5f, 0.0f, 1.0f, 7.0f, 12.0f, 3.0f};
  std::vector<float> out(gate.size()), via(gate.size());
  swiglu_oai(gate.data(), up.data(), out.data(), gate.size());
  gated_activation(FfnActivation::SwigluOai, gate.data(), up.data(), via.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min(double(gate[i]), 7.0), u = std::clamp(double(up[i]), -7.0, 7.0);
    EXPECT_NEAR(out[i], g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0),
                1e-5 * (1 + std::fabs(out[i])))
        << i;
    EXPECT_EQ(out[i], via[i]) << i;
  }
  EXPECT_EQ(out[7], out[5] / 8.0f * 4.0f);  // both gates clamp to 7: only (u + 1) differs
  std::vector<float> silu(gate.size()), gelu(gate.size()), ref(gate.size());
  gated_activation(FfnActivation::Silu, gate.data(), up.data(), silu.data(), gate.size());
  swiglu(gate.data(), up.data(), ref.data(), gate.size());
  EXPECT_EQ(silu, ref);
  gated_activation(FfnActivation::GeluTanh, gate.data(), up.data(), gelu.data(), gate.size());
  gelu_tanh_gate(gate.data(), up.data(), ref.data(), gate.size());
  EXPECT_EQ(gelu, ref);
}

TEST(VectorOps, SoftmaxWithMaskedEntries) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (KernelIsa isa : isas()) {
    for (size_t n : kLengths) {
      auto x = randv(n, 7, 4.0f);
      if (n > 3) x[1] = x[n - 1] = ninf;
      double m = ninf;
      for (float v : x) m = std::max(m, double(v));
      double sum = 0;
      for (float v : x) sum += std::exp(double(v) - m);
      auto p = x;
      float lse = softmax(p.data(), n, isa);
      EXPECT_NEAR(lse, m + std::log(sum), 1e-5 * (1 + std::fabs(lse)));
      double total = 0;
      for (size_t i = 0; i < n; ++i) {
        double want = std::exp(double(x[i]) - m) / sum;
        ASSERT_NEAR(p[i], want, 1e-6 + 2e-6 * want) << isa_name(isa) << " n=" << n << " i=" << i;
        total += p[i];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
      if (n > 3) {
        EXPECT_EQ(p[1], 0.0f);
        EXPECT_EQ(p[n - 1], 0.0f);
      }
    }
  }
}

TEST(VectorOps, SoftmaxAndMaxRejectEmptyOrFullyMasked) {
  std::vector<float> all_masked(10, -std::numeric_limits<float>::infinity());
  for (KernelIsa isa : isas()) {
    EXPECT_THROW(softmax(all_masked.data(), 0, isa), Error);
    EXPECT_THROW(max_value(all_masked.data(), 0, isa), Error);
    EXPECT_THROW(softmax(all_masked.data(), all_masked.size(), isa), Error);
  }
}

TEST(VectorOps, MaxValue) {
  for (KernelIsa isa : isas())
    for (size_t n : kLengths) {
      auto x = randv(n, 8);
      x[n / 2] = 50.0f;
      EXPECT_EQ(max_value(x.data(), n, isa), 50.0f);
    }
}

TEST(VectorOps, HalfFloatRowsConvertExactly) {
  std::vector<uint16_t> h(1000), b(1000);
  std::mt19937 rng(9);
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = static_cast<uint16_t>(rng());
    if (((h[i] >> 10) & 0x1f) == 0x1f) h[i] &= 0xbfff;  // avoid NaN payload comparisons
    b[i] = f32_to_bf16(std::ldexp(float(int(rng() % 2001) - 1000), int(rng() % 40) - 20));
  }
  for (KernelIsa isa : isas()) {
    std::vector<float> out(1000);
    f16_to_f32_row(h.data(), out.data(), out.size(), isa);
    for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(out[i], f16_to_f32(h[i])) << i;
    bf16_to_f32_row(b.data(), out.data(), out.size(), isa);
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(out[i], bf16_to_f32(b[i])) << i;
  }
}

// f32 -> f16 / bf16 rows round exactly as the scalar conversions (nearest even, ties
// included, NaN stays NaN), over normal, subnormal, overflowing and tie values.
TEST(VectorOps, F32RowsRoundToHalfFloatsAsTheScalarConversions) {
  std::vector<float> x;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int i = 0; i < 500; ++i) x.push_back(std::ldexp(u(rng), i % 40 - 30));
  for (float f : {0.0f, -0.0f, 1e-8f, 6.1e-5f, 65504.0f, 65520.0f, 1e30f, -1e30f, 1.0f + 0x1p-11f,
                  1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, INFINITY, -INFINITY})
    x.push_back(f);
  for (size_t i = x.size(); i % 8 != 3;) x.push_back(float(++i));  // a tail after the vectors
  for (KernelIsa isa : isas()) {
    std::vector<uint16_t> h(x.size()), b(x.size());
    f32_to_f16_row(x.data(), h.data(), x.size(), isa);
    f32_to_bf16_row(x.data(), b.data(), x.size(), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(h[i], f32_to_f16(x[i])) << isa_name(isa) << " " << x[i];
      ASSERT_EQ(b[i], f32_to_bf16(x[i])) << isa_name(isa) << " " << x[i];
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    f32_to_bf16_row(&nan, b.data(), 1, isa);
    EXPECT_TRUE(std::isnan(bf16_to_f32(b[0])));
    std::vector<float> nans(8, nan);
    f32_to_f16_row(nans.data(), h.data(), 8, isa);
    f32_to_bf16_row(nans.data(), b.data(), 8, isa);
    EXPECT_TRUE(std::isnan(f16_to_f32(h[0])) && std::isnan(bf16_to_f32(b[7]))) << isa_name(isa);
  }
}

TEST(VectorOps, UnsupportedIsaIsAnError) {
  // The cap makes the levels above it unsupported on any host, AVX-512 ones included.
  float a[4] = {1, 2, 3, 4};
  uint16_t h[4] = {};
  {
    ScopedIsaCap cap(KernelIsa::Avx2);
    EXPECT_THROW(dot(a, a, 4, KernelIsa::Avx512), Error);
    EXPECT_THROW(softmax(a, 4, KernelIsa::Avx512), Error);
  }
  {
    ScopedIsaCap cap(KernelIsa::Scalar);
    EXPECT_THROW(dot(a, a, 4, KernelIsa::Avx2), Error);
    EXPECT_THROW(f16_to_f32_row(h, a, 4, KernelIsa::Avx2), Error);
    EXPECT_FLOAT_EQ(dot(a, a, 4), 30.0f);  // the default ISA follows the cap down to scalar
  }
}

}  // namespace pith
