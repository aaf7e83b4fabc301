// Phi-3 / Phi-3.5 (mini, medium): one fused QKV projection and one fused gate/up projection
// (gate rows first), split-half RoPE over the whole head, a sliding window on every layer
// where the config sets one. Partial rotary (Phi-4-mini) and longrope scaling are refused.
#include "engine/architectures/architecture.h"

#include "common/error.h"

namespace pith {

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  if (double f = keys.number({"", "partial_rotary_factor"}).value_or(1.0); f != 1.0)
    fail("{}: partial_rotary_factor {} is not supported (only 1.0)", keys.source(), f);
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
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
