// Hyper-parameters of a decoder-only transformer, read from GGUF metadata or a Hugging Face
// config.json. Everything the forward pass needs to know lives here: the shapes, and the
// options by which the supported families (engine/architectures/) differ from Llama.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace pith {

// How RoPE pairs a head's dimensions. GGUF `llama` files store Q/K rows permuted for adjacent
// pairs (2i, 2i+1), and pith permutes HF Llama checkpoints the same way at load; the other
// families (qwen2/3, phi3, gemma) rotate halves (i, i + head_dim/2) in both formats.
enum class RopeStyle { AdjacentPairs, SplitHalf };

// The gated feed-forward's activation: act(gate) * up.
enum class FfnActivation { Silu, GeluTanh };

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

  // Family options (defaults are Llama's).
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  FfnActivation ffn_activation = FfnActivation::Silu;
  bool qkv_bias = false;      // Q/K/V projections add a bias (qwen2)
  bool qk_norm = false;       // per-head RMSNorm of Q and K before RoPE (qwen3, gemma3)
  bool post_norms = false;    // attention and FFN outputs normed before the residual add (gemma2/3)
  float embed_scale = 1.0f;   // token embeddings are multiplied by this (gemma: sqrt(d_model))
  float attn_scale = 0.0f;    // query scale; 0 means 1/sqrt(head_dim)
  float attn_softcap = 0.0f;  // scores -> cap*tanh(scores/cap) before softmax; 0: off
  float final_softcap = 0.0f;  // logits -> cap*tanh(logits/cap); 0: off
  // Sliding-window attention: a query sees the `sliding_window` most recent KV slots of its
  // sequence (itself included), on the layers flagged in sliding_layers. 0: off.
  uint32_t sliding_window = 0;
  std::vector<uint8_t> sliding_layers;  // [n_layers] when sliding_window > 0
  // Sliding layers of gemma3 use their own RoPE base and no scaling; 0: same as global.
  float rope_theta_local = 0.0f;
  // Mixture of experts (qwen2moe, qwen3moe): every layer's FFN is n_experts SwiGLU experts of
  // width d_ff_expert, n_experts_used of them per token chosen by a softmax router (their
  // weights renormalised to sum 1 when moe_norm_top_k), plus, where d_ff_shared_expert > 0,
  // a shared expert gated by sigmoid(w . h). 0 experts: the dense FFN of width d_ff.
  uint32_t n_experts = 0;
  uint32_t n_experts_used = 0;
  uint32_t d_ff_expert = 0;
  uint32_t d_ff_shared_expert = 0;
  bool moe_norm_top_k = false;

  uint32_t q_dim() const { return n_heads * head_dim; }
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
  float query_scale() const {  // attn_scale or 1/sqrt(head_dim)
    return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  bool layer_slides(uint32_t layer) const {
    return sliding_window > 0 && layer < sliding_layers.size() && sliding_layers[layer] != 0;
  }
};

}  // namespace pith
