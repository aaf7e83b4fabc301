// `pith bench delta-rule`: the gated delta rule of Gated DeltaNet layers (engine/delta_rule.h)
// alone, one value head of Qwen3.5's size, over a prefill of n tokens: the chunked form timed
// against the recurrent (token by token) form in the same run, interleaved run by run, so the
// ratio is the chunked form's speed-up on this CPU.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "engine/kernels/cpu_features.h"

namespace pith::bench {

struct DeltaRuleBenchOptions {
  size_t tokens = 512;
  size_t k_dim = 128, v_dim = 128;
  int reps = 7;
  KernelIsa isa = best_isa();
};

// Prints a line per form and the ratio; returns the JSON summary.
nlohmann::json run_delta_rule_bench(const DeltaRuleBenchOptions& options);

}  // namespace pith::bench
