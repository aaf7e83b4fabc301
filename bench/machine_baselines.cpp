// Memory-bandwidth and FMA-peak probes (see machine_baselines.h). The read loop is the
// fastest streaming read found on the development VM: AVX2 loads into four independent
// accumulators over long contiguous chunks and no software prefetch (the hardware prefetcher
// and the out-of-order window keep enough misses in flight; prefetching 2-16 KB ahead read
// 10-15 % slower). It is an upper bound for the decode kernels, which must also compute.
#include "bench/machine_baselines.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/kernels/cpu_features.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;

#pragma GCC push_options
#pragma GCC target("avx2,fma")
float read_chunk_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

// 10 independent FMA chains of 8 lanes: enough to cover FMA latency x 2 pipes.
float fma_loop_avx2(size_t iters) {
  __m256 acc[10];
  for (int j = 0; j < 10; ++j) acc[j] = _mm256_set1_ps(0.001f * j);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (size_t i = 0; i < iters; ++i)
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
  __m256 s = acc[0];
  for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}
#pragma GCC pop_options

// The integer dot products of the quantised kernels: 10 chains of u8 x s8 -> s32.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")
int32_t dot_loop_vnni512(size_t iters) {  // 64 MACs per vpdpbusd
  __m512i acc[10];
  for (int j = 0; j < 10; ++j) acc[j] = _mm512_set1_epi32(j);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (size_t i = 0; i < iters; ++i)
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  __m512i s = acc[0];
  for (int j = 1; j < 10; ++j) s = _mm512_add_epi32(s, acc[j]);
  int32_t lanes[16];  // (not _mm512_reduce_add_epi32: GCC 12 warns inside it)
  _mm512_storeu_si512(lanes, s);
  return lanes[0];
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
int32_t dot_loop_avx2(size_t iters) {  // 32 MACs per vpmaddubsw + vpmaddwd + vpaddd
  __m256i acc[10];
  for (int j = 0; j < 10; ++j) acc[j] = _mm256_set1_epi32(j);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (size_t i = 0; i < iters; ++i)
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j)
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  __m256i s = acc[0];
  for (int j = 1; j < 10; ++j) s = _mm256_add_epi32(s, acc[j]);
  return _mm256_extract_epi32(s, 0);
}
#pragma GCC pop_options

// BF16 pairs into f32 (vdpbf16ps): 32 MACs per instruction.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")
float dot_loop_bf16(size_t iters) {
  __m512 acc[10];
  for (int j = 0; j < 10; ++j) acc[j] = _mm512_set1_ps(0.001f * j);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);
  for (size_t i = 0; i < iters; ++i)
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  __m512 s = acc[0];
  for (int j = 1; j < 10; ++j) s = _mm512_add_ps(s, acc[j]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return lanes[0];
}
#pragma GCC pop_options

float read_chunk_scalar(const float* p, size_t n) {
  float s = 0;
  for (size_t i = 0; i < n; i += 16) s += p[i];  // one load per cache line
  return s;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes)
    : pool_(pool), buf_(nullptr, std::free) {
  if (bytes < (size_t{1} << 20))
    fail("bandwidth probe: a {}-byte buffer is too small to time (need at least 1 MiB)", bytes);
  n_ = bytes / sizeof(float) / 64 * 64;
  buf_.reset(static_cast<float*>(std::aligned_alloc(64, n_ * sizeof(float))));
  if (!buf_) fail("bandwidth probe: cannot allocate {} bytes", bytes);
  // Touch every page in parallel so first-touch costs are outside the timing.
  n_tasks_ = pool.size() * 16;
  per_task_ = (n_ / n_tasks_ + 63) / 64 * 64;
  pool.parallel_for(n_tasks_, [&](size_t t, size_t) {
    size_t b = std::min(n_, t * per_task_), e = std::min(n_, b + per_task_);
    for (size_t i = b; i < e; ++i) buf_[i] = 1.0f;
  });
}

double ReadBandwidthProbe::sample() {
  const bool simd = isa_supported(KernelIsa::Avx2);
  volatile float sink = 0;
  std::vector<float> partial(n_tasks_);
  auto t0 = Clock::now();
  pool_.parallel_for(n_tasks_, [&](size_t t, size_t) {
    size_t b = std::min(n_, t * per_task_), e = std::min(n_, b + per_task_);
    partial[t] =
        simd ? read_chunk_avx2(buf_.get() + b, e - b) : read_chunk_scalar(buf_.get() + b, e - b);
  });
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (float p : partial) sink = sink + p;
  return double(n_) * sizeof(float) / s / 1e9;
}

double measure_read_bandwidth_gb_s(ThreadPool& pool, size_t bytes, int reps) {
  ReadBandwidthProbe probe(pool, bytes);
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) samples.push_back(probe.sample());
  return median(samples);
}

namespace {

// Median over `reps` of every pool thread running loop(iters) at once, in G(FL)OP/s given the
// operations one iteration does per thread.
double timed_peak(ThreadPool& pool, int reps, size_t iters, double ops_per_iter,
                  const std::function<float(size_t)>& loop) {
  std::vector<double> samples;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<float> out(pool.size());
    auto t0 = Clock::now();
    pool.parallel_for(pool.size(), [&](size_t t, size_t) { out[t] = loop(iters); });
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (float v : out) sink = sink + v;
    samples.push_back(double(iters) * pool.size() * ops_per_iter / s / 1e9);
  }
  return median(samples);
}

}  // namespace

double measure_peak_gflop_s(ThreadPool& pool, int reps) {
  if (isa_supported(KernelIsa::Avx2))
    return timed_peak(pool, reps, 20'000'000, 10 * 8 * 2, fma_loop_avx2);
  return timed_peak(pool, reps, 50'000'000, 2, [](size_t iters) {
    float a = 0.5f;
    for (size_t i = 0; i < iters; ++i) a = a * 0.999999f + 1e-7f;
    return a;
  });
}

PeakRate measure_weight_peak(ThreadPool& pool, DType weights, int reps) {
  const CpuFeatures& f = cpu_features();
  const bool quantised = weights != DType::F32 && weights != DType::F16 && weights != DType::BF16;
  const bool cap512 = isa_supported(KernelIsa::Avx512);
  constexpr size_t kIters = 10'000'000;
  if (quantised && cap512 && f.avx512vnni)
    return {timed_peak(pool, reps, kIters, 10.0 * 64 * 2,
                       [](size_t n) { return float(dot_loop_vnni512(n)); }),
            "int8 vpdpbusd (512-bit)"};
  if (quantised && isa_supported(KernelIsa::Avx2))
    return {timed_peak(pool, reps, kIters, 10.0 * 32 * 2,
                       [](size_t n) { return float(dot_loop_avx2(n)); }),
            "int8 vpmaddubsw (256-bit)"};
  if (weights == DType::BF16 && cap512 && f.avx512bf16)
    return {timed_peak(pool, reps, kIters, 10.0 * 32 * 2, dot_loop_bf16),
            "bf16 vdpbf16ps (512-bit)"};
  return {measure_peak_gflop_s(pool, reps), "f32 FMA"};
}

DecodeTokenCost decode_token_cost(const ModelWeights& w, bool as_bf16) {
  DecodeTokenCost c;
  // `share` of the matrix: the fraction of a mixture's experts one token reads.
  auto add = [&](const WeightMatrix& m, double share = 1.0) {
    if (!m.data) return;
    const size_t bytes =
        as_bf16 ? m.rows * m.cols * (m.dtype == DType::F32 ? 4 : 2) : m.rows * m.row_bytes();
    c.bytes += static_cast<size_t>(double(bytes) * share);
    c.flops += 2.0 * double(m.rows) * double(m.cols) * share;
  };
  const ModelConfig& cfg = w.config;
  const double expert_share =
      cfg.n_experts > 0 ? double(cfg.n_experts_used) / double(cfg.n_experts) : 0.0;
  for (const auto& l : w.layers) {
    for (const WeightMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.ssm_qkv, &l.ssm_gate,
          &l.ssm_beta, &l.ssm_alpha, &l.ssm_out, &l.router, &l.sh_gate, &l.sh_up, &l.sh_down,
          &l.ple_gate, &l.ple_proj})
      add(*m);
    for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (const WeightMatrix& m : *experts) add(m, expert_share);
  }
  add(w.output);
  // Hybrid models also read and write one sequence's recurrent state per step.
  c.bytes += 2 * w.config.recurrent_state_floats() * sizeof(float);
  return c;
}

}  // namespace pith::bench
