// `pith bench matmul`: the matmul kernels alone on Llama 3.2 1B shapes, random weights made in
// process. Decode-sized runs (few tokens) are reported in GB/s of weights read against the
// memory read bandwidth measured in the same run; prefill-sized runs in GFLOP/s against the
// FMA peak measured in the same run.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/kernels/cpu_features.h"
#include "formats/dtype.h"

namespace pith::bench {

struct MatmulShape {
  std::string name;  // e.g. "attn_q"
  size_t rows, cols;
};

struct MatmulBenchOptions {
  std::vector<DType> dtypes{DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
  std::vector<size_t> tokens{1, 512};
  std::vector<MatmulShape> shapes;  // empty: the Llama 3.2 1B set
  size_t threads = 2;
  int reps = 5;
  KernelIsa isa = best_isa();
  size_t max_lm_head_tokens = 32;  // the 128256-row output matrix only runs for few tokens
};

std::vector<MatmulShape> llama32_1b_shapes();

// Runs the suite, printing a human-readable table to stdout; returns the JSON summary.
nlohmann::json run_matmul_bench(const MatmulBenchOptions& options);

}  // namespace pith::bench
