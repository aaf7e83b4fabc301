// The chunked delta rule on the GPU (kernels/delta_chunked_body.h, through delta_rule_chunked)
// against the recurrent kernel on the same device inputs: outputs and the states left behind,
// on a batch of sequences of 1, 63, 64, 65 and 150 inputs (a decode step beside chunk
// boundaries), F32 and BF16 outputs. Then both kernels timed (CUDA events, median of 7) on one
// sequence of 512 and 2048 tokens and on 8 x 512 at Qwen3.5-0.8B's head shape (16 value heads,
// k_dim = v_dim = 128): one JSON line per case with the ratio. The unit test
// cuda_delta_net_host_test checks the bodies' arithmetic against the CPU; this one the
// launches, the barriers and the device's rounding. Needs a GPU (skips with 77).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../unit/delta_batch.h"
#include "common/fp16.h"
#include "device_vector.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/delta_chunked_body.h"
#include "engine/cuda/kernels/delta_net_body.h"
#include "gpu_test_main.h"

namespace pith::cuda {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// A DeltaBatch's arrays on the device, with the chunked form's scratch and both outputs.
struct DeviceProblem {
  Dev<uint32_t> first, count, slot;
  Dev<float> states, mixed, beta, g, scratch;
  Dev<uint16_t> out;  // BF16 outputs
  Dev<float> out32;   // F32 outputs
  kern::DeltaRuleParams p;
  kern::DeltaChunkScratch x;
  uint32_t max_chunks;

  explicit DeviceProblem(const DeltaBatch& b)
      : first(b.first),
        count(b.count),
        slot(b.slot),
        states(b.states),
        mixed(b.mixed),
        beta(b.beta),
        g(b.g),
        scratch(size_t{b.T} * b.Hv * (1 + 2 * kern::kDeltaChunk)),
        out(size_t{b.T} * b.Hv * b.dv),
        out32(size_t{b.T} * b.Hv * b.dv) {
    p = b.params(
        {first.get(), count.get(), slot.get(), states.get(), mixed.get(), beta.get(), g.get()},
        nullptr);
    const size_t rows = size_t{b.T} * b.Hv;
    x = {scratch.get(), scratch.get() + rows, scratch.get() + rows * (1 + kern::kDeltaChunk)};
    max_chunks = (b.T + kern::kDeltaChunk - 1) / kern::kDeltaChunk;
  }
  void reset_states(const DeltaBatch& b) {
    EXPECT_EQ(
        cudaMemcpy(states.get(), b.states.data(), b.states.size() * 4, cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  void run(bool chunked, DType type) {
    p.out = type == DType::F32 ? static_cast<void*>(out32.get()) : static_cast<void*>(out.get());
    if (chunked)
      delta_rule_chunked(p, x, max_chunks, type, nullptr);
    else
      delta_rule(p, type, nullptr);
  }
  std::vector<float> outputs(DType type) const {
    if (type == DType::F32) return out32.read();
    std::vector<uint16_t> bits = out.read();
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(bits[i]);
    return v;
  }
};

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float rel,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * (1 + std::fabs(want[i]))) << what << " " << i;
}

TEST(DeltaRuleGpu, ChunkedMatchesRecurrent) {
  for (auto [dk, dv, kh, hv] : {std::array<uint32_t, 4>{128, 128, 2, 4}, {48, 20, 1, 3}}) {
    const DeltaBatch pr({1, 65, 150, 64, 63}, {4, 3, 2, 1, 0}, 5, dk, dv, kh, hv, 100);
    DeviceProblem d(pr);
    for (DType type : {DType::F32, DType::BF16}) {
      d.reset_states(pr);
      d.run(false, type);
      const std::vector<float> want_out = d.outputs(type), want_states = d.states.read();
      d.reset_states(pr);
      d.run(true, type);
      CUDA_OK(cudaGetLastError());
      expect_near_all(d.outputs(type), want_out, type == DType::F32 ? 1e-4f : 1.0f / 64, "output");
      expect_near_all(d.states.read(), want_states, 1e-4f, "state float");
    }
  }
}

double median_ms(DeviceProblem& d, const DeltaBatch& pr, bool chunked) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ms;
  for (int rep = 0; rep < 8; ++rep) {
    d.reset_states(pr);
    cudaEventRecord(a);
    d.run(chunked, DType::BF16);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (rep > 0) ms.push_back(t);  // the first run warms up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

TEST(DeltaRuleGpu, ChunkedAgainstRecurrentTimes) {
  PITH_SKIP_TIMING_ON_SIM();
  struct Case {
    const char* name;
    std::vector<uint32_t> counts;
  };
  const std::vector<Case> cases = {
      {"1x512", {512}}, {"1x2048", {2048}}, {"8x512", std::vector<uint32_t>(8, 512)}};
  for (const Case& c : cases) {
    std::vector<uint32_t> slots(c.counts.size());
    for (uint32_t i = 0; i < slots.size(); ++i) slots[i] = i;
    // qwen3.5-0.8b's linear-attention heads
    const DeltaBatch pr(c.counts, slots, static_cast<uint32_t>(slots.size()), 128, 128, 16, 16,
                        100);
    DeviceProblem d(pr);
    const double rec = median_ms(d, pr, false), chk = median_ms(d, pr, true);
    CUDA_OK(cudaGetLastError());
    std::printf(
        "{\"delta_rule_gpu\":\"%s\",\"tokens\":%u,\"recurrent_ms\":%.4f,\"chunked_ms\":%.4f,"
        "\"speedup\":%.2f}\n",
        c.name, pr.T, rec, chk, rec / chk);
    EXPECT_GT(rec, 0.0);
  }
}

}  // namespace
}  // namespace pith::cuda

PITH_GPU_TEST_MAIN()
