// Machine baselines measured inside a benchmark run, so results can be stated as a fraction
// of what this machine can do at that moment (other processes, frequency, VM neighbours):
//   - memory read bandwidth: streaming a large buffer with the same thread pool,
//   - peak f32 FMA throughput: independent FMA chains in registers on every thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "engine/model_weights.h"

namespace pith::bench {

// Streams a buffer of `bytes` (allocated and written once, at construction) split across the
// pool's threads; each sample() is one timed pass in GB/s (1e9 bytes/s). A benchmark that
// compares against the bandwidth takes samples between its own timed runs, so that the host's
// drift (other tenants, frequency) affects both sides alike.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, size_t bytes);
  double sample();

 private:
  ThreadPool& pool_;
  std::unique_ptr<float[], void (*)(void*)> buf_;
  size_t n_ = 0, n_tasks_ = 0, per_task_ = 0;
};

// Median over `reps` samples of a ReadBandwidthProbe of `bytes`.
double measure_read_bandwidth_gb_s(ThreadPool& pool, size_t bytes, int reps);

// Median over `reps` of the f32 multiply-add rate of all pool threads, in GFLOP/s (an FMA
// counts 2 flops). Uses AVX2+FMA when available, else scalar.
double measure_peak_gflop_s(ThreadPool& pool, int reps);

// What one decode token costs a model's matrices: the bytes it streams when it runs alone
// (every layer matrix, of a mixture of experts the router, the shared expert and n_used
// experts' worth, the per-layer input projections, and the LM head; one embedding row is
// negligible) and its FLOPs. With the probes above these give the decode floor (bandwidth /
// bytes) and the batched ceiling (peak / FLOPs). `as_bf16`: the matrices as a GPU holds them
// (quantised and 16-bit types as BF16, F32 as F32) instead of as stored.
struct DecodeTokenCost {
  size_t bytes = 0;
  double flops = 0;
};
DecodeTokenCost decode_token_cost(const ModelWeights& w, bool as_bf16 = false);

// The multiply-add peak of the kernels that multiply `weights` (ops/s, 2 per multiply-add) on
// this CPU within the ISA cap: int8 dot products for the quantised types (vpdpbusd, else
// vpmaddubsw), vdpbf16ps for BF16 on AVX512_BF16, the f32 FMA peak otherwise. `what` names it.
struct PeakRate {
  double gops = 0;
  std::string what;
};
PeakRate measure_weight_peak(ThreadPool& pool, DType weights, int reps);

// Median of a vector of samples (copied).
double median(std::vector<double> v);

}  // namespace pith::bench
