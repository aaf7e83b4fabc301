// `pith bench embeddings`: /v1/embeddings throughput through a real `pith serve` (started on -m,
// or at --url), the inputs of a run sent as batched requests from concurrent clients, beside the
// client-side loop a naive indexer runs (one input per request, one request at a time), and, with
// --against URL, the same batched load on another server (llama-server --embeddings, vLLM),
// interleaved round by round. Every round's inputs are new texts (no prefix-cache hits). With
// --against, the first round also compares the two servers' vectors for the same inputs (cosine):
// on the same GGUF with the same pooling they are the same embedding.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct EmbeddingBenchOptions {
  std::string model;    // start `pith serve` on this file, or
  std::string url;      // measure the pith server here
  std::string against;  // another OpenAI-compatible server's URL ("": none)
  std::string api_key;
  int inputs = 64;      // inputs per run
  int batch = 16;       // inputs per request
  int concurrency = 4;  // requests at once
  int words = 100;      // distinct words per input
  int rounds = 3;       // runs of each kind, alternating the order; medians
  uint64_t seed = 1;
  // -m only: the child server's engine.
  int threads = 0;
  std::string device = "auto";
  std::string kv_memory;
  std::string pooling;  // --pooling ("": the server's default)
};

nlohmann::json run_embedding_bench(const EmbeddingBenchOptions& options);

}  // namespace pith::bench
