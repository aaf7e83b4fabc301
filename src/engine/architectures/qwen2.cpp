// Qwen2 / Qwen2.5: Llama's layers with a bias on the Q/K/V projections, split-half RoPE.
// Sliding windows only when `use_sliding_window` is set (layers from max_window_layers on).
#include "engine/architectures/architecture.h"

namespace pith {

void read_qwen_sliding_window(ModelConfig& c, const ArchitectureKeys& keys) {
  if (keys.is_gguf() || !keys.flag({"", "use_sliding_window"}).value_or(false)) return;
  read_sliding_window(c, keys, {"", "sliding_window"}, 0);
  if (c.sliding_window == 0 || keys.layer_types()) return;
  const double first = keys.number({"", "max_window_layers"}).value_or(c.n_layers);
  for (uint32_t l = 0; l < c.n_layers; ++l) c.sliding_layers[l] = l >= first;
}

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qkv_bias = true;
  read_qwen_sliding_window(c, keys);
}

std::vector<ArchValue> describe(const ModelConfig&) {
  return {};
}

}  // namespace

extern const Architecture kQwen2Architecture{
    .name = "qwen2",
    .gguf_name = "qwen2",
    .hf_class = "Qwen2ForCausalLM",
    .hf_model_type = "qwen2",
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
