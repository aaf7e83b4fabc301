// `pith bench grammar`: the cost of constrained decoding's vocabulary mask, per generated token,
// on a real vocabulary (the Llama 3 128k one by default in the docs). Compiles the SDK's grammar
// headers (sdk/include/pith/grammar*.hpp) natively, exactly as inferlets use them in Wasm.
//
// A seeded random walk generates documents under the grammar: at each step the mask of allowed
// tokens is computed (timed, together with accepting the chosen token), then a token is picked
// among the allowed ones (half the time a short structural token, so documents nest and close).
//   - cold pass: first walk, lazy per-context token classification included;
//   - timed pass: a second walk with another seed (`us_per_token`: its mean, plus p50/p99);
//   - baseline, same run: the naive mask (every token matched from scratch against the parser
//     stacks, as llama.cpp's GBNF sampler does) on the first --naive-steps states of the timed
//     walk; the masks must be identical, and `speedup_vs_naive` is the ratio of mean costs;
//   - the cold pass's tokens replayed on two fresh automata in turn, with and without sharing
//     a bounded repetition's classifications along its chain (`chain_sharing_speedup`).
// --schema FILE benchmarks the grammar the server makes from a response_format JSON Schema;
// --replay-out FILE saves the timed walk so bench/xgrammar_replay.py can time xgrammar on the
// same vocabulary, grammar (or schema) and tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct GrammarBenchOptions {
  std::string model;         // .gguf, HF folder or tokenizer.json: the vocabulary
  std::string grammar_file;  // GBNF; empty: the built-in JSON grammar
  std::string schema_file;   // JSON Schema, converted as the server converts response_format
  std::string replay_file;   // if set: vocabulary, grammar and timed walk written as JSON, so
                             // other matchers can replay the same tokens (bench/xgrammar_replay.py)
  size_t tokens = 2000;      // steps per pass
  size_t naive_steps = 8;    // baseline steps (each matches the whole vocabulary naively)
  uint32_t context_frames = 3;
  uint64_t seed = 1;
};

// Runs the suite, printing a readable report to stdout; returns the JSON summary.
nlohmann::json run_grammar_bench(const GrammarBenchOptions& options);

}  // namespace pith::bench
