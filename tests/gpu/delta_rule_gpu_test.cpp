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
#include <random>
#include <vector>

#include "common/fp16.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/delta_chunked_body.h"
#include "engine/cuda/kernels/delta_net_body.h"
#include "engine/delta_rule.h"
#include "gpu_test_main.h"

namespace pith::cuda {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    EXPECT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> read() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// One forward's delta-rule inputs on the device: sequences of `count` inputs in a pool of as
// many slots (reversed order), the layer's block after 24 conv floats.
struct Problem {
  uint32_t dk, dv, k_heads, Hv, key_dim, C, T = 0;
  std::vector<uint32_t> first, count, slot;
  size_t conv = 24, layer, slot_floats;
  std::vector<float> states, mixed, beta, g;

  Problem(std::vector<uint32_t> counts, uint32_t dk_, uint32_t dv_, uint32_t kh, uint32_t hv)
      : dk(dk_),
        dv(dv_),
        k_heads(kh),
        Hv(hv),
        key_dim(kh * dk_),
        C(2 * kh * dk_ + hv * dv_),
        count(std::move(counts)) {
    for (uint32_t i = 0; i < count.size(); ++i) {
      first.push_back(T);
      T += count[i];
      slot.push_back(static_cast<uint32_t>(count.size()) - 1 - i);
    }
    layer = conv + size_t{Hv} * dv * dk;
    slot_floats = layer;
    states = random_floats(count.size() * slot_floats, 100, 0.1f);
    mixed = random_floats(size_t{T} * C, 101);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t h = 0; h < 2 * k_heads; ++h) l2_normalize(mixed.data() + t * C + h * dk, dk, 0);
    beta = random_floats(size_t{T} * Hv, 102);
    for (float& x : beta) x = 1.0f / (1.0f + std::exp(-x));
    g = random_floats(size_t{T} * Hv, 103);
    for (float& x : g) x = -std::fabs(x) * 0.3f;
  }
};

// The problem's device buffers and launch parameters.
struct DeviceProblem {
  Dev<uint32_t> first, count, slot;
  Dev<float> states, mixed, beta, g, sg, sqk, stinv;
  Dev<uint16_t> out;  // F32 outputs use out32
  Dev<float> out32;
  kern::DeltaRuleParams p;
  kern::DeltaChunkScratch x;
  uint32_t max_chunks;

  explicit DeviceProblem(const Problem& pr)
      : first(pr.first),
        count(pr.count),
        slot(pr.slot),
        states(pr.states),
        mixed(pr.mixed),
        beta(pr.beta),
        g(pr.g),
        sg(size_t{pr.T} * pr.Hv),
        sqk(size_t{pr.T} * pr.Hv * kern::kDeltaChunk),
        stinv(size_t{pr.T} * pr.Hv * kern::kDeltaChunk),
        out(size_t{pr.T} * pr.Hv * pr.dv),
        out32(size_t{pr.T} * pr.Hv * pr.dv) {
    p.seqs = {first.p,  count.p,        slot.p, static_cast<uint32_t>(pr.count.size()),
              states.p, pr.slot_floats, 0};
    p.conv_floats = pr.conv;
    p.mixed = mixed.p;
    p.beta = beta.p;
    p.g = g.p;
    p.C = pr.C;
    p.key_dim = pr.key_dim;
    p.Hv = pr.Hv;
    p.k_heads = pr.k_heads;
    p.dk = pr.dk;
    p.dv = pr.dv;
    x = {sg.p, sqk.p, stinv.p};
    max_chunks = (pr.T + kern::kDeltaChunk - 1) / kern::kDeltaChunk;
  }
  void reset_states(const Problem& pr) {
    EXPECT_EQ(cudaMemcpy(states.p, pr.states.data(), pr.states.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  void run(bool chunked, DType type) {
    p.out = type == DType::F32 ? static_cast<void*>(out32.p) : static_cast<void*>(out.p);
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
    const Problem pr({1, 65, 150, 64, 63}, dk, dv, kh, hv);
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

double median_ms(DeviceProblem& d, const Problem& pr, bool chunked) {
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
  struct Case {
    const char* name;
    std::vector<uint32_t> counts;
  };
  const std::vector<Case> cases = {
      {"1x512", {512}}, {"1x2048", {2048}}, {"8x512", std::vector<uint32_t>(8, 512)}};
  for (const Case& c : cases) {
    const Problem pr(c.counts, 128, 128, 16, 16);  // qwen3.5-0.8b's linear-attention heads
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
