// `pith bench batching`: the paper's Table 5 on this machine. N concurrent text-completion
// inferlets (inferlets/greedy_abi: one fused forward per generated token) run against one
// model under each dispatch policy (adaptive, eager, k, t); reports requests/s, tokens/s and
// the mean batch size. Baseline in the same run: the eager policy (no batching).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct BatchingBenchOptions {
  std::string model;
  std::vector<std::string> policies{"adaptive"};  // eager always runs too, as the baseline
  int instances = 128;
  int prompt_tokens = 32;
  int max_tokens = 32;
  int runs = 3;                 // median over runs
  int threads = 2;              // engine threads
  std::string inferlet_dir;     // "" = the build tree
  std::string cache_dir;        // native cache ("" = default)
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
};

nlohmann::json run_batching_bench(const BatchingBenchOptions& options);

}  // namespace pith::bench
