// `pith bench serving`: the same closed-loop streaming load against two OpenAI-compatible servers
// (pith and, with --against, any other: llama-server, vLLM, another pith), interleaved, and the
// ratios. Each of `concurrency` clients sends streamed /v1/completions back to back (distinct
// prompts of --prompt-words words after an optional shared prefix, --max-tokens tokens with
// ignore_eos, greedy); a run ends after --requests requests. Per server and concurrency:
// generated tok/s (completion tokens / wall time), time to first token and inter-token latency
// (p50, p99), failed requests. Rounds alternate the order (AB, BA, ...) because a shared machine
// drifts; medians over rounds are reported. --chat sends /v1/chat/completions (the prompt as one
// user message) and --response-format a structured-output constraint with them (json_object, or
// a JSON Schema file as json_schema): its per-token cost against another server or build;
// --presence-penalty / --frequency-penalty / --repetition-penalty the same for the penalties.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pith::bench {

struct HttpLoadOptions {
  std::string url;      // the server under test; empty: start `pith serve -m model`
  std::string model;    // -m: the model file for the started server
  std::string against;  // the baseline server's URL (empty: only the first is measured)
  std::string api_key;  // sent to both
  std::vector<int> concurrency = {8, 32};
  int requests = 0;  // per run; 0: 2 x concurrency
  int prompt_words = 100;
  int shared_prefix_words = 0;
  int max_tokens = 64;
  int rounds = 1;
  unsigned seed = 1;
  bool chat = false;            // /v1/chat/completions instead of /v1/completions
  std::string response_format;  // "": none; "json_object"; else a JSON Schema file (chat)
  double temperature = 0;       // > 0: sampled, request i with seed i
  double presence_penalty = 0;  // sent when not 0 (OpenAI's penalties: applied by the server)
  double frequency_penalty = 0;
  double repetition_penalty = 1;  // sent when not 1 (vLLM's; it covers the prompt's tokens too)
  // For the started server.
  size_t threads = 0;
  std::string device = "auto";
  std::string kv_memory = "2G";
  std::string kv_dtype = "auto";
};

nlohmann::json run_http_load_bench(const HttpLoadOptions& o);

}  // namespace pith::bench
