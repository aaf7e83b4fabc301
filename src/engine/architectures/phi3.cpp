// Phi-3 / Phi-3.5 (mini, medium) and Phi-4-mini: one fused QKV projection and one fused gate/up
// projection (gate rows first), split-half RoPE over the head or its first partial_rotary_factor
// (Phi-4-mini: 0.75), LongRoPE scaling for the 128k variants (ModelConfig::longrope, read by
// the loaders), a sliding window on every layer where the config sets one.
#include "engine/architectures/architecture.h"

#include "common/error.h"

namespace pith {

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"}, 0);
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  return {{{"attention.sliding_window", "sliding_window"}, double(c.sliding_window), true}};
}

}  // namespace

extern const Architecture kPhi3Architecture{
    .name = "phi3",
    .gguf_name = "phi3",
    .hf_class = "Phi3ForCausalLM",
    .hf_model_type = "phi3",
    .fused_qkv = true,
    .fused_gate_up = true,
    .partial_rotary = true,
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
