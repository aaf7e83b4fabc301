// Gemma 3 (text; the 1B model and the language part of 4B-27B): Gemma 2's layers plus a
// per-head RMSNorm of Q and K, five sliding-window layers per full one, sliding layers with
// their own RoPE base (rope_local_base_freq, 10000) and no RoPE scaling; soft-capping only
// where the config sets it.
#include "engine/architectures/architecture.h"

namespace pith {

void configure_gemma_common(ModelConfig& c, const ArchitectureKeys& keys);  // gemma2.cpp
std::vector<ArchValue> describe_gemma_common(const ModelConfig& c);

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  configure_gemma_common(c, keys);
  c.qk_norm = true;
  c.rope_theta_local = static_cast<float>(
      keys.number({"rope.freq_base_swa", "rope_local_base_freq"}).value_or(10000.0));
  const double pattern =
      keys.number({"attention.sliding_window_pattern", "sliding_window_pattern"}).value_or(6);
  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"},
                      static_cast<uint32_t>(pattern));
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  std::vector<ArchValue> v = describe_gemma_common(c);
  v.push_back({{"rope.freq_base_swa", "rope_local_base_freq"}, c.rope_theta_local, false});
  return v;
}

}  // namespace

extern const Architecture kGemma3Architecture{
    .name = "gemma3",
    .gguf_name = "gemma3",
    .hf_class = "Gemma3ForCausalLM",
    .hf_model_type = "gemma3_text",
    // The 4B-27B checkpoints are multimodal; their text_config names only what differs from
    // transformers' Gemma3TextConfig, whose defaults these are.
    .hf_multimodal_class = "Gemma3ForConditionalGeneration",
    .hf_config_defaults = R"({"vocab_size": 262208, "num_attention_heads": 8,
      "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
      "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
      "sliding_window_pattern": 6, "attention_bias": false})",
    .hf_names = {.ffn_norm = "pre_feedforward_layernorm",
                 .post_attn_norm = "post_attention_layernorm",
                 .post_ffn_norm = "post_feedforward_layernorm"},
    .hf_norm_offset = true,
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
