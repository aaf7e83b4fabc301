// Hyper-parameters of a Llama-family decoder, read from GGUF metadata or a Hugging Face
// config.json. Everything the forward pass needs to know about shapes lives here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pith {

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  uint32_t n_layers = 0;
  uint32_t d_model = 0;     // embedding length
  uint32_t n_heads = 0;     // query heads
  uint32_t n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  uint32_t head_dim = 0;    // usually d_model / n_heads
  uint32_t d_ff = 0;        // SwiGLU hidden size
  uint32_t vocab_size = 0;
  uint32_t context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  // Per rotary pair i < head_dim/2: the angle is pos * theta^(-2i/head_dim) / rope_freq_factors[i].
  // Empty means no scaling. Llama 3.1+ derives these from its rope_scaling config
  // (factor, low/high_freq_factor, original context) or stores them as `rope_freqs.weight`.
  std::vector<float> rope_freq_factors;
  bool tied_output = false;  // LM head reuses token_embd

  uint32_t q_dim() const { return n_heads * head_dim; }
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace pith
