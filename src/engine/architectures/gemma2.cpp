// Gemma 2: pre- and post-norms around attention and FFN, GELU-tanh gated FFN, embeddings
// scaled by sqrt(d_model), query scale 1/sqrt(query_pre_attn_scalar), attention and final
// logits soft-capped, sliding window on every other layer (layer 0 slides), tied LM head.
// HF stores norm weights as w - 1 (the model computes x * (1 + w)); llama.cpp's GGUF stores w.
#include "engine/architectures/architecture.h"

#include <cmath>

namespace pith {

// The options Gemma 2 and 3 share (gemma3.cpp adds to them).
void configure_gemma_common(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.ffn_activation = FfnActivation::GeluTanh;
  c.post_norms = true;
  c.tied_output = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
  // query_pre_attn_scalar == head_dim (most sizes) keeps the default scale, bit-identical
  // to a GGUF file of the same model that records no scale.
  if (auto s = keys.number({"", "query_pre_attn_scalar"}); s && *s > 0 && *s != c.head_dim)
    c.attn_scale = static_cast<float>(1.0 / std::sqrt(*s));
  else if (auto g = keys.number({"attention.scale", ""}); g && *g > 0)
    c.attn_scale = static_cast<float>(*g);
  c.attn_softcap = static_cast<float>(
      keys.number({"attn_logit_softcapping", "attn_logit_softcapping"}).value_or(0));
  c.final_softcap = static_cast<float>(
      keys.number({"final_logit_softcapping", "final_logit_softcapping"}).value_or(0));
}

std::vector<ArchValue> describe_gemma_common(const ModelConfig& c) {
  const double qpas =
      c.attn_scale > 0 ? std::round(1.0 / (double(c.attn_scale) * c.attn_scale)) : c.head_dim;
  return {{{"", "query_pre_attn_scalar"}, qpas, true},
          {{"attention.sliding_window", "sliding_window"}, double(c.sliding_window), true},
          {{"attn_logit_softcapping", "attn_logit_softcapping"}, c.attn_softcap, false},
          {{"final_logit_softcapping", "final_logit_softcapping"}, c.final_softcap, false}};
}

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  configure_gemma_common(c, keys);
  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"}, 2);
}

}  // namespace

extern const Architecture kGemma2Architecture{
    .name = "gemma2",
    .gguf_name = "gemma2",
    .hf_class = "Gemma2ForCausalLM",
    .hf_model_type = "gemma2",
    .hf_names = {.ffn_norm = "pre_feedforward_layernorm",
                 .post_attn_norm = "post_attention_layernorm",
                 .post_ffn_norm = "post_feedforward_layernorm"},
    .hf_norm_offset = true,
    .configure = configure,
    .describe = describe_gemma_common,
};

}  // namespace pith
