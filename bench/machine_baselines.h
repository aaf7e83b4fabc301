// Machine baselines measured inside a benchmark run, so results can be stated as a fraction
// of what this machine can do at that moment (other processes, frequency, VM neighbours):
//   - memory read bandwidth: streaming a large buffer with the same thread pool,
//   - peak f32 FMA throughput: independent FMA chains in registers on every thread.
#pragma once

#include <cstddef>
#include <vector>

#include "common/thread_pool.h"

namespace pith::bench {

// Median over `reps` passes of reading `bytes` (split across the pool's threads) in GB/s
// (1e9 bytes/s). The buffer is allocated and written once before timing.
double measure_read_bandwidth_gb_s(ThreadPool& pool, size_t bytes, int reps);

// Median over `reps` of the f32 multiply-add rate of all pool threads, in GFLOP/s (an FMA
// counts 2 flops). Uses AVX2+FMA when available, else scalar.
double measure_peak_gflop_s(ThreadPool& pool, int reps);

// Median of a vector of samples (copied).
double median(std::vector<double> v);

}  // namespace pith::bench
