// `pith bench contention`: the control layer under KV-memory pressure. `requests` greedy
// completions (a `prompt_tokens` prompt, `gen_tokens` generated, pages allocated as they fill,
// as the SDK does) start at once on a KV pool sized to 1/F of what they need together, for each
// oversubscription factor F. Each factor runs under the suspend policy with each preemption mode
// (waiting allocations; suspended instances' pages swapped to host memory and back, or dropped
// and recomputed from their tokens) and under the kill policy (the paper's baseline), beside an
// unpressured run (a pool that holds everything) in the same process. Reports completed
// requests, throughput and p99 latency against the unpressured run, recompute against swap,
// whether every completed output equals the unpressured one, and what the pressure cost
// (suspensions, pages swapped and time swapping, pages dropped, tokens recomputed and time to
// resume).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct ContentionBenchOptions {
  std::string model;
  int requests = 32;
  int prompt_tokens = 64;
  int gen_tokens = 192;
  std::vector<double> factors = {2, 5, 10};
  int threads = 2;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
};

nlohmann::json run_contention_bench(const ContentionBenchOptions& options);

}  // namespace pith::bench
