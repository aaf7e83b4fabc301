// Gemma 4 (text; 31B dense and the language part of the published checkpoints): Gemma 3's
// pre+post norms, GELU-tanh FFN, embeddings x sqrt(d) and Q/K norms, with
//  - sliding-window layers (window 512-1024, 5 of every 6) and global layers of different
//    shapes: global heads are larger (global_head_dim) with fewer KV heads, and where
//    attention_k_eq_v they have no V projection (V is the K projection);
//  - a weightless RMSNorm of V, no query scaling (the Q/K norms bound the scores);
//  - "proportional" RoPE on global layers: only the first partial_rotary_factor of each head's
//    pairs turn, at frequencies of the full head size (GGUF: rope_freqs.weight, 1e30 on the
//    pairs that do not turn); sliding layers turn all of theirs with their own base;
//  - a learned scalar multiplying each layer's output, a final logit soft-cap;
//  - optionally, the last num_kv_shared_layers layers reuse an earlier layer's KV (E2B/E4B),
//    with FFNs twice as wide where use_double_wide_mlp.
//  - optionally (E2B/E4B), per-layer token embeddings: a second embedding table gives each token
//    a small vector per layer, mixed with a projection of its embedding and added to each
//    layer's output through a GELU-gated branch (engine.cpp).
//  - optionally (26B-A4B), routed experts beside the dense FFN of every layer.
// HF norm weights are stored as used (no w - 1 offset, unlike Gemma 2/3).
#include <fmt/format.h>

#include <cmath>

#include "common/error.h"
#include "engine/architectures/architecture.h"

namespace pith {

namespace {

// The pairs that do not turn get this divisor (as llama.cpp's converter writes them): their
// angle is pos * 1e-30 times a frequency, i.e. no rotation.
constexpr float kNoRotation = 1e30f;

uint32_t size_or(const ArchitectureKeys& keys, ArchKey key, uint32_t fallback) {
  std::optional<double> v = keys.number(key);
  if (!v) return fallback;
  if (*v < 0 || *v > 65536 || *v != std::floor(*v))
    fail("{}: '{}' = {} is not a size", keys.source(), keys.is_gguf() ? key.gguf : key.hf, *v);
  return static_cast<uint32_t>(*v);
}

// transformers v5 saves the global layers' shape as per_layer_config = {"<layer>": {head_dim,
// num_key_value_heads}} instead of global_head_dim / num_global_key_value_heads. Every entry
// must be a global layer, all of one shape.
void read_per_layer_config(ModelConfig& c, const ArchitectureKeys& keys) {
  if (keys.is_gguf()) return;
  bool seen = false;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string hd_key = fmt::format("per_layer_config.{}.head_dim", l);
    const std::string kv_key = fmt::format("per_layer_config.{}.num_key_value_heads", l);
    const std::optional<double> hd = keys.number({"", hd_key});
    const std::optional<double> kv = keys.number({"", kv_key});
    if (!hd && !kv) continue;
    if (c.layer_slides(l))
      fail("{}: per_layer_config gives sliding layer {} its own shape (unsupported)", keys.source(),
           l);
    const uint32_t head_dim = size_or(keys, {"", hd_key}, c.head_dim);
    const uint32_t kv_heads = size_or(keys, {"", kv_key}, c.n_kv_heads);
    if (seen && (head_dim != c.global_head_dim || kv_heads != c.global_kv_heads))
      fail("{}: per_layer_config gives global layers different shapes (unsupported)",
           keys.source());
    c.global_head_dim = head_dim;
    c.global_kv_heads = kv_heads;
    seen = true;
  }
}

// Global layers' KV head count from a per-layer array (GGUF) that must agree with the layer
// kinds: one value on sliding layers, one on global ones.
void read_kv_heads_per_layer(ModelConfig& c, const ArchitectureKeys& keys) {
  auto heads = keys.numbers({"attention.head_count_kv", ""});
  if (!heads || heads->size() == 1) return;
  for (uint32_t l = 0; l < c.n_layers && l < heads->size(); ++l)
    if (!c.layer_slides(l)) {
      c.global_kv_heads = static_cast<uint32_t>((*heads)[l]);
      break;
    }
  if (c.global_kv_heads == c.n_kv_heads) c.global_kv_heads = 0;
}

void configure_hf_rope(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_theta = static_cast<float>(
      keys.number({"", "rope_parameters.full_attention.rope_theta"}).value_or(1e6));
  c.rope_theta_local = static_cast<float>(
      keys.number({"", "rope_parameters.sliding_attention.rope_theta"}).value_or(1e4));
  const std::string global_type =
      keys.text({"", "rope_parameters.full_attention.rope_type"}).value_or("proportional");
  const std::string local_type =
      keys.text({"", "rope_parameters.sliding_attention.rope_type"}).value_or("default");
  if ((global_type != "proportional" && global_type != "default") || local_type != "default")
    fail("{}: rope types '{}' (global) / '{}' (sliding) are not supported (proportional, default)",
         keys.source(), global_type, local_type);
  const double global_partial =
      global_type == "default"
          ? 1.0
          : keys.number({"", "rope_parameters.full_attention.partial_rotary_factor"}).value_or(1.0);
  const double local_partial =
      keys.number({"", "rope_parameters.sliding_attention.partial_rotary_factor"}).value_or(1.0);
  if (!(global_partial > 0 && global_partial <= 1) || !(local_partial > 0 && local_partial <= 1))
    fail("{}: partial_rotary_factor must be in (0, 1]", keys.source());
  // Proportional: the first partial * head/2 pairs turn at theta^(-2i/head), the rest do not.
  const uint32_t hd = c.global_head_dim > 0 ? c.global_head_dim : c.head_dim;
  const uint32_t turning = static_cast<uint32_t>(global_partial * hd / 2);
  if (turning < hd / 2) {
    c.rope_freq_factors.assign(hd / 2, kNoRotation);
    for (uint32_t i = 0; i < turning; ++i) c.rope_freq_factors[i] = 1.0f;
  }
  const uint32_t local_dims = static_cast<uint32_t>(local_partial * c.head_dim);
  if (local_dims != c.head_dim) {
    if (local_dims == 0 || local_dims % 2 != 0)
      fail("{}: sliding partial_rotary_factor {} gives {} rotary dimensions", keys.source(),
           local_partial, local_dims);
    c.rope_dim_local = local_dims;
  }
}

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.ffn_activation = FfnActivation::GeluTanh;
  c.post_norms = true;
  c.qk_norm = true;
  c.v_norm = true;
  c.layer_scale = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
  c.attn_scale = 1.0f;
  if (!keys.is_gguf()) c.tied_output = keys.flag({"", "tie_word_embeddings"}).value_or(true);
  c.final_softcap = static_cast<float>(
      keys.number({"final_logit_softcapping", "final_logit_softcapping"}).value_or(0));
  refuse_attention_bias(keys);
  // HF's default is 256 (E2B/E4B); a checkpoint without them says 0.
  c.d_per_layer_input =
      size_or(keys, {"embedding_length_per_layer_input", "hidden_size_per_layer_input"},
              keys.is_gguf() ? 0 : 256);
  if (c.d_per_layer_input > 0 && !keys.is_gguf() &&
      size_or(keys, {"", "vocab_size_per_layer_input"}, c.vocab_size) != c.vocab_size)
    fail("{}: vocab_size_per_layer_input differs from vocab_size (unsupported)", keys.source());
  // 26B-A4B: experts beside the dense FFN in every layer, top-k of a softmax renormalised.
  if (keys.is_gguf() ? keys.number({"expert_count", ""}).value_or(0) > 0
                     : keys.flag({"", "enable_moe_block"}).value_or(false)) {
    c.moe_beside_dense = true;
    c.moe_norm_top_k = true;
    c.n_experts = size_or(keys, {"expert_count", "num_experts"}, 0);
    c.n_experts_used = size_or(keys, {"expert_used_count", "top_k_experts"}, 0);
    c.d_ff_expert = size_or(keys, {"expert_feed_forward_length", "moe_intermediate_size"}, 0);
    if (c.n_experts == 0 || c.n_experts_used == 0 || c.n_experts_used > c.n_experts ||
        c.d_ff_expert == 0)
      fail("{}: MoE block with {} experts, {} per token, width {}", keys.source(), c.n_experts,
           c.n_experts_used, c.d_ff_expert);
  }
  if (keys.text({"", "use_bidirectional_attention"}).value_or("") == "all")
    fail(
        "{}: use_bidirectional_attention = all is not supported (a decoder needs causal "
        "attention)",
        keys.source());

  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"}, 6);
  if (c.sliding_window == 0) fail("{}: Gemma 4 needs a sliding window", keys.source());
  if (keys.is_gguf()) {
    // key_length is the global layers' head size, key_length_swa the sliding layers'.
    c.global_head_dim = c.head_dim;
    c.head_dim = size_or(keys, {"attention.key_length_swa", ""}, c.head_dim);
    if (size_or(keys, {"attention.value_length_swa", ""}, c.head_dim) != c.head_dim)
      fail("{}: value_length_swa differs from key_length_swa (unsupported)", keys.source());
    c.rope_theta_local =
        static_cast<float>(keys.number({"rope.freq_base_swa", ""}).value_or(10000.0));
    const uint32_t local_dims = size_or(keys, {"rope.dimension_count_swa", ""}, c.head_dim);
    if (local_dims != c.head_dim) c.rope_dim_local = local_dims;
    read_kv_heads_per_layer(c, keys);
    // Global layers without V: the file has no attn_v tensor for them.
    for (uint32_t l = 0; l < c.n_layers; ++l)
      if (!c.layer_slides(l)) {
        c.global_v_from_k = !keys.has_tensor(fmt::format("blk.{}.attn_v.weight", l)).value_or(true);
        break;
      }
    c.n_kv_shared_layers = size_or(keys, {"attention.shared_kv_layers", ""}, 0);
    if (auto ff = keys.numbers({"feed_forward_length", ""}); ff && ff->size() > 1)
      c.double_wide_shared_ffn = ff->back() == 2.0 * c.d_ff;
  } else {
    c.global_head_dim = size_or(keys, {"", "global_head_dim"}, 512);
    c.global_v_from_k = keys.flag({"", "attention_k_eq_v"}).value_or(false);
    // HF gives global layers their own KV head count only together with attention_k_eq_v.
    if (c.global_v_from_k) c.global_kv_heads = size_or(keys, {"", "num_global_key_value_heads"}, 0);
    read_per_layer_config(c, keys);
    c.n_kv_shared_layers = size_or(keys, {"", "num_kv_shared_layers"}, 0);
    c.double_wide_shared_ffn = keys.flag({"", "use_double_wide_mlp"}).value_or(false);
    configure_hf_rope(c, keys);
  }
  if (c.global_head_dim == c.head_dim) c.global_head_dim = 0;
  if (c.global_kv_heads == c.n_kv_heads) c.global_kv_heads = 0;
  if (c.n_kv_shared_layers >= c.n_layers)
    fail("{}: {} KV-sharing layers leave no layer that stores KV", keys.source(),
         c.n_kv_shared_layers);
  if (c.n_kv_shared_layers > 0)
    for (uint32_t l = c.n_layers - c.n_kv_shared_layers; l < c.n_layers; ++l)
      if (c.kv_source_layer(l) == l)
        fail("{}: KV-sharing layer {} has no earlier {} layer to read", keys.source(), l,
             c.layer_slides(l) ? "sliding" : "global");
  if (!c.double_wide_shared_ffn || c.n_kv_shared_layers == 0) c.double_wide_shared_ffn = false;
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  return {{{"attention.sliding_window", "sliding_window"}, double(c.sliding_window), true},
          {{"final_logit_softcapping", "final_logit_softcapping"}, c.final_softcap, false},
          {{"rope.freq_base_swa", ""}, c.rope_theta_local, false},
          {{"attention.shared_kv_layers", ""}, double(c.n_kv_shared_layers), true},
          {{"expert_count", "num_experts"}, double(c.n_experts), true},
          {{"expert_used_count", "top_k_experts"}, double(c.n_experts_used), true},
          {{"expert_feed_forward_length", "moe_intermediate_size"}, double(c.d_ff_expert), true}};
}

}  // namespace

extern const Architecture kGemma4Architecture{
    .name = "gemma4",
    .gguf_name = "gemma4",
    .hf_class = "Gemma4ForCausalLM",
    .hf_model_type = "gemma4_text",
    .hf_multimodal_class = "Gemma4ForConditionalGeneration",
    .hf_names = {.ffn_norm = "pre_feedforward_layernorm",
                 .post_attn_norm = "post_attention_layernorm",
                 .post_ffn_norm = "post_feedforward_layernorm"},
    .per_layer_attention = true,
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
