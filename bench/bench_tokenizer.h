// `pith bench tokenizer`: encode and decode throughput of a model's tokenizer on a few MB of
// text (a file, or the deterministic mixed corpus of tokenizer/sample_text.h). Each figure
// is the median of several runs, in MB/s of UTF-8 text (1e6 bytes/s). Baselines measured in
// the same run:
//   - the naive BPE encoder (same ids, merges found by rescanning every pair after each
//     merge: quadratic per word) — the priority-queue merger's speedup over it;
//   - memcpy of the same text — an upper bound no tokenizer reaches; the tokenizer's
//     throughput is also printed as a fraction of it.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct TokenizerBenchOptions {
  std::string model;       // .gguf, HF folder or tokenizer.json
  std::string file;        // text to tokenize; empty: generated mixed corpus
  size_t bytes = 4 << 20;  // corpus size when generated
  int reps = 5;
  bool naive = true;  // also time the naive encoder (BPE only)
};

// Runs the suite, printing a readable report to stdout; returns the JSON summary.
nlohmann::json run_tokenizer_bench(const TokenizerBenchOptions& options);

}  // namespace pith::bench
