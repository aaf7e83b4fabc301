// The CUDA kernel bodies the model families beyond llama need (qwen2/3, mistral, phi3, gemma
// 2/3: docs/gpu.md "Families"), run on the CPU over every (block, thread) of their launch grid
// against the CPU engine's functions: Q/K/V bias rows, per-head RMSNorm (Q/K norms, weightless V
// norms), GELU-tanh gating, the embedding scale and the final logit soft-cap. RoPE's split-half
// layout and the attention options are in cuda_kernels_host_test and attention_plan_test.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cuda_kernels_host_util.h"
#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/norm_body.h"
#include "engine/kernels/vector_ops.h"
#include "engine/lm_head.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class T>
void check_add_bias(uint32_t n, uint32_t d) {
  std::vector<float> x = random_floats(size_t{n} * d, 20 + d, 2.0f);
  const std::vector<float> bias = random_floats(d, 21 + d);
  std::vector<T> dev(x.size());
  for (size_t i = 0; i < x.size(); ++i) kern::store_f32(&dev[i], x[i]);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = f(dev[i]) + bias[i % d];
  for (uint32_t blocks : grids(size_t{n} * d / N, kern::kActivationThreads)) {
    std::vector<T> got = dev;
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::add_bias_body<N>(b, nb, t, got.data(), bias.data(), n, d);
    });
    for (size_t i = 0; i < want.size(); ++i) {
      if constexpr (std::is_same_v<T, float>)
        ASSERT_EQ(got[i], want[i]) << "N=" << N << " i=" << i;
      else
        ASSERT_EQ(got[i].bits, f32_to_bf16(want[i])) << "N=" << N << " i=" << i;
    }
  }
}

TEST(CudaFamilyKernelsHost, BiasRowsAddTheirColumnsBias) {
  check_add_bias<1, float>(3, 100);
  check_add_bias<4, float>(5, 896);  // qwen2.5-0.5B's width
  check_add_bias<1, Bf16>(2, 129);
  check_add_bias<8, Bf16>(4, 128);
}

template <class T>
void check_head_norm(uint32_t rows, uint32_t d, bool weighted) {
  const float eps = 1e-6f;
  std::vector<float> x = random_floats(size_t{rows} * d, 30 + d, 3.0f);
  const std::vector<float> weight = random_floats(d, 31 + d);
  std::vector<T> dev(x.size());
  for (size_t i = 0; i < x.size(); ++i) kern::store_f32(&dev[i], x[i]);
  const std::vector<float> ones(d, 1.0f);
  std::vector<float> want(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<float> in(d);
    for (uint32_t j = 0; j < d; ++j) in[j] = f(dev[size_t{r} * d + j]);
    rmsnorm(in.data(), weighted ? weight.data() : ones.data(), want.data() + size_t{r} * d, d, eps);
  }
  auto sh = std::make_unique<kern::NormShared>();
  for (uint32_t r = 0; r < rows; ++r) {
    kern::HostBlock blk{r, 0, kern::kHeadNormThreads};
    kern::rmsnorm_rows_body(blk, *sh, dev.data(), weighted ? weight.data() : nullptr, d, eps);
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if constexpr (std::is_same_v<T, float>)
      ASSERT_NEAR(dev[i], want[i], 2e-6f * (1 + std::fabs(want[i]))) << "d=" << d << " i=" << i;
    else
      expect_bf16_near(f(dev[i]), bf16_to_f32(f32_to_bf16(want[i])), "head norm", i);
  }
}

TEST(CudaFamilyKernelsHost, PerHeadRmsNormInPlace) {
  for (uint32_t d : {64u, 128u, 256u, 80u, 1u}) {
    check_head_norm<float>(6, d, true);
    check_head_norm<float>(3, d, false);  // a weightless norm (gemma4's V heads)
    check_head_norm<Bf16>(6, d, true);
  }
}

template <uint32_t N, class T>
void check_gelu_gate(uint32_t n, uint32_t ff, uint32_t ld) {
  std::vector<T> fused(size_t{n} * ld);
  const std::vector<float> src = random_floats(fused.size(), 40 + ff, 3.0f);
  for (size_t i = 0; i < src.size(); ++i) kern::store_f32(&fused[i], src[i]);
  std::vector<T> out(size_t{n} * ff);
  for (uint32_t blocks : grids(size_t{n} * ff / N, kern::kActivationThreads))
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::swiglu_body<N, true>(b, nb, t, fused.data(), fused.data() + ff, n, ff, ld, out.data());
    });
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<float> gate(ff), up(ff), want(ff);
    for (uint32_t j = 0; j < ff; ++j) {
      gate[j] = f(fused[size_t{i} * ld + j]);
      up[j] = f(fused[size_t{i} * ld + ff + j]);
    }
    gelu_tanh_gate(gate.data(), up.data(), want.data(), ff, KernelIsa::Scalar);
    for (uint32_t j = 0; j < ff; ++j) {
      const float got = f(out[size_t{i} * ff + j]);
      // Far in the negative tail the CPU's scalar tanh form cancels to 0 where the kernel's
      // exp form keeps a tiny value: compare absolutely there.
      if (std::is_same_v<T, float> || std::fabs(want[j]) < 1e-4f)
        ASSERT_NEAR(got, want[j], 2e-6f * (1 + std::fabs(want[j]))) << i << "," << j;
      else
        expect_bf16_near(got, bf16_to_f32(f32_to_bf16(want[j])), "gelu gate", j);
    }
  }
}

TEST(CudaFamilyKernelsHost, GeluTanhGateMatchesTheCpu) {
  check_gelu_gate<1, float>(3, 100, 200);
  check_gelu_gate<4, float>(2, 256, 512);
  check_gelu_gate<1, Bf16>(3, 77, 160);
  check_gelu_gate<8, Bf16>(2, 1152, 2304);  // gemma3-1B's width, fused gate|up rows
}

template <uint32_t N>
void check_scale_and_cap(size_t total) {
  const std::vector<float> x = random_floats(total, 50, 40.0f);
  for (uint32_t blocks : grids(total / N, kern::kActivationThreads)) {
    std::vector<float> scaled = x, capped = x;
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t b, uint32_t nb, uint32_t t) {
      kern::scale_body<N>(b, nb, t, scaled.data(), total, 45.25f, 0);
      kern::scale_body<N>(b, nb, t, capped.data(), total, 1, 30.0f);
    });
    std::vector<float> want_cap = x;
    soft_cap(want_cap.data(), total, 30.0f);
    for (size_t i = 0; i < total; ++i) {
      ASSERT_EQ(scaled[i], x[i] * 45.25f) << "N=" << N << " i=" << i;
      ASSERT_NEAR(capped[i], want_cap[i], 1e-5f) << "N=" << N << " i=" << i;
      ASSERT_LE(std::fabs(capped[i]), 30.0f);
    }
  }
}

TEST(CudaFamilyKernelsHost, EmbeddingScaleAndLogitSoftCap) {
  check_scale_and_cap<1>(999);
  check_scale_and_cap<4>(1000);
}

}  // namespace
}  // namespace pith::cuda
