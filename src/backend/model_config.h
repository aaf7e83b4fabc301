// Hyper-parameters of a decoder-only transformer, read from GGUF metadata or a Hugging Face
// config.json. Everything the forward pass needs to know lives here: the shapes, and the
// options by which the supported families (engine/architectures/) differ from Llama.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace pith {

// How RoPE pairs a head's dimensions. GGUF `llama` files store Q/K rows permuted for adjacent
// pairs (2i, 2i+1), and pith permutes HF Llama checkpoints the same way at load; the other
// families (qwen2/3, phi3, gemma) rotate halves (i, i + head_dim/2) in both formats.
enum class RopeStyle { AdjacentPairs, SplitHalf };

// The gated feed-forward's activation: act(gate) * up. SwigluOai (gpt-oss): the gate clamped
// to at most 7 and the up projection to [-7, 7], then g * sigmoid(1.702 g) * (u + 1).
enum class FfnActivation { Silu, GeluTanh, SwigluOai };

// Gated DeltaNet linear attention (the recurrent layers of hybrid models, qwen3.5): per layer
// a short causal convolution over [q | k | v] and a gated delta rule over one k_dim x v_dim
// state matrix per value head (engine/gated_delta_net.h).
struct DeltaNetConfig {
  uint32_t k_heads = 0, v_heads = 0;  // key heads (shared by v_heads / k_heads value heads)
  uint32_t k_dim = 0, v_dim = 0;      // per-head sizes
  uint32_t conv_kernel = 0;           // convolution width (its window keeps kernel - 1 inputs)
  // Value head h reads key head h % k_heads (llama.cpp's converter orders value heads so; HF
  // checkpoints group them by key head and are reordered at load, architecture.h).

  uint32_t key_dim() const { return k_heads * k_dim; }
  uint32_t value_dim() const { return v_heads * v_dim; }
  uint32_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  size_t conv_floats() const { return size_t{conv_kernel - 1} * conv_channels(); }
  // One recurrent layer's state of one sequence: conv window, then the state matrices.
  size_t layer_state_floats() const { return conv_floats() + size_t{v_heads} * v_dim * k_dim; }
};

// YaRN RoPE scaling (HF rope_scaling "yarn", GGUF rope.scaling.type "yarn"); factor 0: off.
// Rotary pair i turns by pos * freq_i * ((1 - m_i) / factor + m_i): m_i is 1 for the pairs
// that turn more than beta_fast times within original_context (kept as trained), 0 for those
// turning fewer than beta_slow times (interpolated by `factor`), a linear ramp between; cos and
// sin are then scaled by mscale (the attention temperature, 1 + 0.1 ln factor by default).
// engine/rope.h applies it as llama.cpp's rope_yarn does.
struct YarnRope {
  float factor = 0;
  uint32_t original_context = 0;
  float beta_fast = 32, beta_slow = 1;
  float mscale = 1;
  bool truncate = true;  // the ramp's ends rounded to whole pairs (llama.cpp always does)
};

// Phi-3's LongRoPE (HF rope_scaling "longrope" or "su"; GGUF rope_factors_long/short.weight):
// two sets of per-pair divisors, the long one when the served context (context_length) exceeds
// original_context, as llama.cpp picks by its context size (transformers picks per forward by
// the sequence's length, which would change the angles of tokens already cached). The chosen
// set becomes rope_freq_factors; ModelConfig::rope_attn_factor scales cos and sin.
struct LongRope {
  std::vector<float> long_factors, short_factors;
  uint32_t original_context = 0;
  bool enabled() const { return !long_factors.empty(); }
};

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
  YarnRope yarn;      // on top of rope_freq_factors where both are set
  LongRope longrope;  // its chosen factors are rope_freq_factors
  // cos and sin of every rotary angle times this (GGUF rope.scaling.attn_factor outside YaRN,
  // whose own mscale includes it; LongRoPE's sqrt(1 + ln(scale) / ln(original context))).
  float rope_attn_factor = 1.0f;
  bool tied_output = false;  // LM head reuses token_embd
  // How an embedding model pools its final hidden states into one vector, as its file says
  // (GGUF <arch>.pooling_type; an HF folder's sentence-transformers 1_Pooling/config.json):
  // "last", "mean", "cls", or "" when it says nothing (a generative model).
  std::string pooling;

  // Family options (defaults are Llama's).
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  FfnActivation ffn_activation = FfnActivation::Silu;
  bool qkv_bias = false;       // Q/K/V projections add a bias (qwen2)
  bool attn_out_bias = false;  // the attention output projection adds a bias (gpt-oss)
  // gpt-oss: each query head's softmax has a learned sink logit in its denominator (a slot
  // that absorbs attention and contributes no value).
  bool attn_sinks = false;
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
  // gemma4 26B-A4B: the experts run beside the dense FFN (not instead of it), routed from a
  // scaled weightless norm of the residual, each expert's output scaled by its own factor, and
  // the two outputs normed before they are summed (engine.cpp).
  bool moe_beside_dense = false;
  // gpt-oss: the router and each expert's three projections add biases.
  bool moe_bias = false;
  // Partial rotary: RoPE turns the first rope_dim dimensions of each head, the rest pass
  // through (0: all of head_dim). rope_freq_factors then have rope_dim / 2 entries.
  uint32_t rope_dim = 0;
  // The query projection also yields a per-head output gate: wq has 2 * q_dim rows, [query |
  // gate] per head, and the attention output is multiplied by sigmoid(gate) before wo.
  bool attn_output_gate = false;
  // Hybrid models: layers flagged here ([n_layers], empty when none) are Gated DeltaNet
  // layers with a recurrent state per sequence instead of softmax attention over KV pages.
  std::vector<uint8_t> recurrent_layers;
  DeltaNetConfig delta_net;
  // Gemma 4: the global (non-sliding) attention layers have their own head size and KV head
  // count (0: as the sliding ones, head_dim / n_kv_heads), and where global_v_from_k they have
  // no V projection (V is the K projection, before K's norm and RoPE). Sliding layers rotate
  // rope_dim_local dimensions (0: all of their head) with rope_theta_local.
  uint32_t global_head_dim = 0;
  uint32_t global_kv_heads = 0;
  bool global_v_from_k = false;
  uint32_t rope_dim_local = 0;
  bool v_norm = false;       // V heads RMS-normed without a weight before they are stored
  bool layer_scale = false;  // each layer's output (the whole residual) times a learned scalar
  // The last n_kv_shared_layers layers compute no K/V: each attends over the KV of the last
  // earlier layer of its kind (sliding or global). Their FFN is twice as wide where
  // double_wide_shared_ffn (gemma4 E2B).
  uint32_t n_kv_shared_layers = 0;
  bool double_wide_shared_ffn = false;
  // Per-layer token embeddings (gemma4 E2B/E4B): every token also has a d_per_layer_input
  // vector per layer, mixed with a projection of its embedding and fed to each layer through a
  // gated side branch (engine.cpp). 0: none.
  uint32_t d_per_layer_input = 0;

  uint32_t q_dim() const { return n_heads * head_dim; }
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
  float query_scale() const {  // attn_scale or 1/sqrt(head_dim)
    return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  // Rotary dimensions of the global layers (rope_freq_factors has rotary_dim() / 2 entries).
  uint32_t rotary_dim() const {
    return rope_dim > 0 ? rope_dim : (global_head_dim > 0 ? global_head_dim : head_dim);
  }
  // Per-layer attention shapes (uniform unless the global layers differ, gemma4).
  bool layer_global_shape(uint32_t layer) const { return !layer_slides(layer); }
  uint32_t head_dim_of(uint32_t layer) const {
    return global_head_dim > 0 && layer_global_shape(layer) ? global_head_dim : head_dim;
  }
  uint32_t kv_heads_of(uint32_t layer) const {
    return global_kv_heads > 0 && layer_global_shape(layer) ? global_kv_heads : n_kv_heads;
  }
  uint32_t q_dim_of(uint32_t layer) const { return n_heads * head_dim_of(layer); }
  uint32_t kv_dim_of(uint32_t layer) const { return kv_heads_of(layer) * head_dim_of(layer); }
  uint32_t rotary_dim_of(uint32_t layer) const {
    if (rope_theta_local > 0 && layer_slides(layer))
      return rope_dim_local > 0 ? rope_dim_local : head_dim_of(layer);
    return rope_dim > 0 ? rope_dim : head_dim_of(layer);
  }
  bool layer_v_from_k(uint32_t layer) const { return global_v_from_k && layer_global_shape(layer); }
  uint32_t d_ff_of(uint32_t layer) const {
    return double_wide_shared_ffn && !layer_has_kv(layer) ? 2 * d_ff : d_ff;
  }
  // The widest layer's sizes (scratch buffers).
  uint32_t max_head_dim() const { return std::max(head_dim, global_head_dim); }
  uint32_t max_q_dim() const { return n_heads * max_head_dim(); }
  uint32_t max_kv_dim() const {
    uint32_t m = kv_dim();
    for (uint32_t l = 0; l < n_layers; ++l) m = std::max(m, kv_dim_of(l));
    return m;
  }
  uint32_t max_d_ff() const { return double_wide_shared_ffn ? 2 * d_ff : d_ff; }
  bool dense_ffn() const { return n_experts == 0 || moe_beside_dense; }
  bool uniform_attention() const {
    return global_head_dim == 0 && global_kv_heads == 0 && !global_v_from_k &&
           n_kv_shared_layers == 0;
  }
  // Whether the layer computes and stores K/V (not a recurrent or KV-sharing layer).
  bool layer_has_kv(uint32_t layer) const {
    return !layer_recurrent(layer) && layer + n_kv_shared_layers < n_layers;
  }
  // The layer whose KV an attention layer reads: itself, or for a KV-sharing layer the last
  // earlier layer of its kind that stores KV.
  uint32_t kv_source_layer(uint32_t layer) const {
    if (layer_has_kv(layer) || layer_recurrent(layer)) return layer;
    for (uint32_t l = n_layers - n_kv_shared_layers; l-- > 0;)
      if (layer_has_kv(l) && layer_slides(l) == layer_slides(layer)) return l;
    return layer;  // validate_config refuses a model without such a layer
  }
  bool layer_recurrent(uint32_t layer) const {
    return layer < recurrent_layers.size() && recurrent_layers[layer] != 0;
  }
  bool hybrid() const {
    for (uint8_t r : recurrent_layers)
      if (r) return true;
    return false;
  }
  // Layers that store KV, and the KV pool's layer index of an attention layer (a KV-sharing
  // layer reads its source layer's).
  uint32_t n_kv_layers() const {
    uint32_t n = 0;
    for (uint32_t l = 0; l < n_layers; ++l) n += layer_has_kv(l) ? 1 : 0;
    return n;
  }
  uint32_t kv_layer(uint32_t layer) const {
    const uint32_t src = kv_source_layer(layer);
    uint32_t i = 0;
    for (uint32_t l = 0; l < src; ++l) i += layer_has_kv(l) ? 1 : 0;
    return i;
  }
  uint32_t n_recurrent_layers() const {
    uint32_t n = 0;
    for (uint32_t l = 0; l < n_layers; ++l) n += layer_recurrent(l) ? 1 : 0;
    return n;
  }
  // Floats of one sequence's recurrent state (all recurrent layers); 0 for plain models.
  size_t recurrent_state_floats() const {
    return size_t{n_recurrent_layers()} * delta_net.layer_state_floats();
  }
  bool layer_slides(uint32_t layer) const {
    return sliding_window > 0 && layer < sliding_layers.size() && sliding_layers[layer] != 0;
  }
};

}  // namespace pith
