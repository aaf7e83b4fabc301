// POST /v1/embeddings: the request (OpenAI's fields, and vLLM's truncate_prompt_tokens,
// add_special_tokens and normalize) as the built-in openai_embedding inferlet's arguments, and
// the pooled vectors it sends back (pith/embedding_protocol.hpp) as OpenAI's response.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_api.h"

namespace pith {
class Tokenizer;
}

namespace pith::server {

// At most this many inputs in one request (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingRequest {
  std::vector<std::vector<int32_t>> inputs;  // tokenized, in order
  std::string model;                         // as sent ("" when absent)
  std::string adapter;                       // a LoRA adapter's name (set by the route)
  bool base64 = false;                       // encoding_format "base64"
  uint32_t dimensions = 0;                   // 0: the model's hidden size
  bool normalize = true;
  std::string pooling = "last";  // last | mean | cls (set by the route from --pooling)

  std::vector<std::string> inferlet_args() const;
};

// Throws InvalidRequest naming the field for a bad value, an unknown field, an input longer than
// `context_length` tokens (unless truncate_prompt_tokens keeps its last N), or `dimensions`
// outside [1, hidden_size].
EmbeddingRequest parse_embedding_request(const nlohmann::json& body, const Tokenizer& tokenizer,
                                         uint32_t context_length, uint32_t hidden_size);

// OpenAI's list of embeddings: each vector as floats, or (base64) the base64 of its float32
// bytes, little-endian, as the OpenAI clients decode it.
nlohmann::json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                                  const std::string& model, uint64_t prompt_tokens);

}  // namespace pith::server
