// The Python user's baseline of `pith bench model --transformers PYTHON`: the suite's prefill,
// decode and batch-decode tests on a Hugging Face folder through transformers' `generate`
// (bench/transformers_bench.py, embedded in the binary), run by an interpreter that has torch
// and transformers, in the same run and on the same device as pith's own tests.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct TransformersRun {
  std::string python;  // interpreter with torch and transformers
  std::string model;   // Hugging Face folder
  std::string device;  // cpu, cuda or cuda:N (torch's names)
  size_t threads = 0;  // CPU threads (0: torch's default)
  size_t n_prompt = 512, n_gen = 128, batch_steps = 16;
  std::vector<size_t> batch_sizes;
  int reps = 3;
};

struct TransformersResult {
  double pp_tok_s = 0, tg_tok_s = 0;
  std::map<size_t, double> batch_tg_tok_s;
  nlohmann::json report;  // what the script printed (versions, dtype, attention kernel)
};

// Runs the script; fails with its error output when it does not print its JSON.
TransformersResult run_transformers_bench(const TransformersRun& run);

// Runs it and prints pith's figures over its (pith's prefill and decode tokens/s, batch decode
// keyed by batch size as `pith bench model`'s JSON has them); returns the JSON fields
// `transformers` (its report) and `pp_vs_transformers`, `tg_vs_transformers`,
// `batch_vs_transformers`, or `transformers_error` when it failed: a failed baseline does not
// discard pith's own figures.
nlohmann::json compare_with_transformers(const TransformersRun& run, double pp_tok_s,
                                         double tg_tok_s, const nlohmann::json& batch_tok_s);

}  // namespace pith::bench
