// The skinny products of decode steps on a GPU (engine/cuda/gemm.h): the own GEMV
// (kernels/gemv_body.h) against cuBLASLt on the Llama-3.2-1B shapes (Q/K/V, O, gate/up, down,
// the LM head) at 1, 3 and 8 rows, F32 and BF16 outputs; the timed choice per shape; and, in
// GemvGpuTimes, both kernels' times with the L2 flushed before each run (one JSON line per
// shape: the GB/s each streams the weights at, and the GEMV's speedup). Needs a GPU (skips
// with 77).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/fp16.h"
#include "device_vector.h"
#include "engine/cuda/gemm.h"
#include "gpu_test_main.h"

namespace pith::cuda {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

struct Shape {
  const char* name;
  uint32_t rows, cols;
};
// Llama-3.2-1B: fused Q/K/V, O, fused gate/up, down, the tied LM head.
constexpr Shape kShapes[] = {{"qkv", 3072, 2048},
                             {"o", 2048, 2048},
                             {"gate_up", 16384, 2048},
                             {"down", 2048, 8192},
                             {"lm_head", 128256, 2048}};

std::vector<uint16_t> bf16_of(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

// y of both kernels on one shape (weights dw); y_bf16 picks the output type.
void compare(const Shape& s, const Dev<uint16_t>& dw, uint32_t n, bool y_bf16) {
  Dev<uint16_t> dx(bf16_of(random_floats(size_t{n} * s.cols, n + 1)));
  const size_t ldy = s.rows + 4;  // a stride wider than the rows
  Dev<float> y_cublas(n * ldy), y_own(n * ldy);
  const DeviceMatrix m{dw.get(), DType::BF16, s.rows, s.cols};
  const DType yt = y_bf16 ? DType::BF16 : DType::F32;
  Gemm cublas, own;
  cublas.set_skinny(Gemm::Skinny::Cublas);
  own.set_skinny(Gemm::Skinny::Own);
  cublas.run(m, dx.get(), n, y_cublas.get(), yt, nullptr, uint32_t(ldy));
  own.run(m, dx.get(), n, y_own.get(), yt, nullptr, uint32_t(ldy));
  auto value = [&](const std::vector<float>& buf, size_t i) {
    if (!y_bf16) return buf[i];
    const auto* h = reinterpret_cast<const uint16_t*>(buf.data());
    return bf16_to_f32(h[i]);
  };
  const std::vector<float> a = y_cublas.read(), b = y_own.read();
  float worst = 0, scale = 0;
  for (uint32_t t = 0; t < n; ++t)
    for (uint32_t o = 0; o < s.rows; ++o) {
      const float va = value(a, t * ldy + o), vb = value(b, t * ldy + o);
      worst = std::max(worst, std::fabs(va - vb));
      scale = std::max(scale, std::fabs(va));
    }
  // Both sum F32 products of the same BF16 values, in different orders; a BF16 output adds
  // one rounding step of the largest value.
  const float tol = (y_bf16 ? 1.0f / 64 : 1e-4f) * (1 + scale);
  EXPECT_LE(worst, tol) << s.name << " n=" << n << (y_bf16 ? " bf16" : " f32") << " (max |y| "
                        << scale << ")";
}

TEST(GemvGpu, MatchesCublasOnTheModelShapes) {
  for (const Shape& s : kShapes) {
#if PITH_CUDA_SIM
    // The host simulation multiplies serially: the two smaller shapes only (minutes otherwise).
    if (size_t{s.rows} * s.cols > (size_t{8} << 20)) continue;
#endif
    Dev<uint16_t> dw(bf16_of(random_floats(size_t{s.rows} * s.cols, s.rows, 0.05f)));
    for (uint32_t n : {1u, 3u, 8u}) {
      compare(s, dw, n, false);
      if (s.rows != 128256) compare(s, dw, n, true);  // the LM head writes F32 logits
    }
  }
}

// The gate/up GEMV with the activation as its epilogue against cuBLASLt + gated_activation
// (BF16 out, SiLU and GELU): within a BF16 step of the larger value.
TEST(GemvGpu, GatedEpilogueMatchesTheProductThenTheActivation) {
  const Shape s = kShapes[kOnHostSimulation ? 1 : 2];  // gate_up: ff = 8192 (1024 simulated)
  const uint32_t ff = s.rows / 2;
  Dev<uint16_t> dw(bf16_of(random_floats(size_t{s.rows} * s.cols, 21, 0.05f)));
  const DeviceMatrix m{dw.get(), DType::BF16, s.rows, s.cols};
  for (FfnActivation act : {FfnActivation::Silu, FfnActivation::GeluTanh})
    for (uint32_t n : {1u, 5u, 8u}) {
      Dev<uint16_t> dx(bf16_of(random_floats(size_t{n} * s.cols, 22 + n)));
      Dev<uint16_t> scratch(size_t{n} * s.rows), a(size_t{n} * ff), b(size_t{n} * ff);
      Gemm cublas, own;
      cublas.set_skinny(Gemm::Skinny::Cublas);
      own.set_skinny(Gemm::Skinny::Own);
      cublas.run_gated(m, dx.get(), n, a.get(), act, scratch.get(), nullptr);
      own.run_gated(m, dx.get(), n, b.get(), act, scratch.get(), nullptr);
      const std::vector<uint16_t> ha = a.read(), hb = b.read();
      float worst = 0, scale = 0;
      for (size_t i = 0; i < ha.size(); ++i) {
        worst = std::max(worst, std::fabs(bf16_to_f32(ha[i]) - bf16_to_f32(hb[i])));
        scale = std::max(scale, std::fabs(bf16_to_f32(ha[i])));
      }
      EXPECT_LE(worst, (1 + scale) / 32) << "n=" << n << " gelu=" << (act != FfnActivation::Silu);
    }
}

// The timed policy decides each skinny shape once and keeps it; wider products stay on cuBLASLt.
TEST(GemvGpu, TimedChoiceIsMadeOncePerShape) {
  const Shape s = kShapes[kOnHostSimulation ? 1 : 2];
  const std::vector<uint16_t> w = bf16_of(random_floats(size_t{s.rows} * s.cols, 5, 0.05f));
  Dev<uint16_t> dw(w), dx(bf16_of(random_floats(size_t{16} * s.cols, 6)));
  Dev<float> y(size_t{16} * s.rows);
  const DeviceMatrix m{dw.get(), DType::BF16, s.rows, s.cols};
  Gemm g;
  for (int i = 0; i < 3; ++i) g.run(m, dx.get(), 1, y.get(), DType::F32, nullptr);
  g.run(m, dx.get(), 8, y.get(), DType::F32, nullptr);
  g.run(m, dx.get(), 16, y.get(), DType::F32, nullptr);  // not skinny: never timed
  CUDA_OK(cudaDeviceSynchronize());
  const Gemm::SkinnyStats st = g.skinny_stats();
  EXPECT_EQ(st.own + st.cublas, 2u);
  std::printf("{\"gemv_choice\":\"gate_up\",\"own\":%u,\"cublas\":%u}\n", st.own, st.cublas);
}

// Milliseconds of one run of `launch`, median of 9, the L2 flushed before each.
template <class F>
double timed_cold(F&& launch, void* flush, size_t flush_bytes) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ms;
  for (int r = 0; r < 10; ++r) {
    cudaMemsetAsync(flush, r, flush_bytes, nullptr);
    cudaEventRecord(a, nullptr);
    launch();
    cudaEventRecord(b, nullptr);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (r > 0) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

TEST(GemvGpuTimes, OwnGemvAgainstCublasCold) {
  PITH_SKIP_TIMING_ON_SIM();
  int dev = 0, l2 = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  Dev<unsigned char> flush(2 * size_t(l2));
  for (const Shape& s : kShapes) {
    Dev<uint16_t> dw(bf16_of(random_floats(size_t{s.rows} * s.cols, 9, 0.05f)));
    for (uint32_t n : {1u, 4u, 8u}) {
      Dev<uint16_t> dx(bf16_of(random_floats(size_t{n} * s.cols, 10)));
      Dev<float> y(size_t{n} * s.rows);
      const DeviceMatrix m{dw.get(), DType::BF16, s.rows, s.cols};
      Gemm cublas, own;
      cublas.set_skinny(Gemm::Skinny::Cublas);
      own.set_skinny(Gemm::Skinny::Own);
      const double t_cublas =
          timed_cold([&] { cublas.run(m, dx.get(), n, y.get(), DType::F32, nullptr); }, flush.get(),
                     flush.size());
      const double t_own =
          timed_cold([&] { own.run(m, dx.get(), n, y.get(), DType::F32, nullptr); }, flush.get(),
                     flush.size());
      const double bytes = double(s.rows) * s.cols * 2;
      std::printf(
          "{\"gemv_gpu\":\"%s\",\"rows\":%u,\"cols\":%u,\"n\":%u,\"cublas_us\":%.2f,"
          "\"own_us\":%.2f,\"cublas_gb_s\":%.0f,\"own_gb_s\":%.0f,\"speedup\":%.3f}\n",
          s.name, s.rows, s.cols, n, 1e3 * t_cublas, 1e3 * t_own, bytes / t_cublas / 1e6,
          bytes / t_own / 1e6, t_cublas / t_own);
      EXPECT_GT(t_own, 0);
    }
  }
  // The gate/up projection with its activation: cuBLASLt then gated_activation against the
  // fused GEMV (the time of a decode step's whole FFN gate).
  const Shape s = kShapes[2];
  Dev<uint16_t> dw(bf16_of(random_floats(size_t{s.rows} * s.cols, 9, 0.05f)));
  const DeviceMatrix m{dw.get(), DType::BF16, s.rows, s.cols};
  for (uint32_t n : {1u, 8u}) {
    Dev<uint16_t> dx(bf16_of(random_floats(size_t{n} * s.cols, 10)));
    Dev<uint16_t> scratch(size_t{n} * s.rows), out(size_t{n} * s.rows / 2);
    Gemm cublas, own;
    cublas.set_skinny(Gemm::Skinny::Cublas);
    own.set_skinny(Gemm::Skinny::Own);
    const double t_unfused = timed_cold(
        [&] {
          cublas.run_gated(m, dx.get(), n, out.get(), FfnActivation::Silu, scratch.get(), nullptr);
        },
        flush.get(), flush.size());
    const double t_fused = timed_cold(
        [&] {
          own.run_gated(m, dx.get(), n, out.get(), FfnActivation::Silu, scratch.get(), nullptr);
        },
        flush.get(), flush.size());
    std::printf(
        "{\"gemv_gpu\":\"gate_up+swiglu\",\"n\":%u,\"cublas_then_act_us\":%.2f,"
        "\"fused_us\":%.2f,\"speedup\":%.3f}\n",
        n, 1e3 * t_unfused, 1e3 * t_fused, t_unfused / t_fused);
  }
}

}  // namespace
}  // namespace pith::cuda

PITH_GPU_TEST_MAIN()
