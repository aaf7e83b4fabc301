// Qwen3 (dense): Llama's layers with a per-head RMSNorm of Q and K before RoPE (no Q/K/V
// bias), split-half RoPE, head_dim independent of d_model / n_heads.
#include "engine/architectures/architecture.h"

namespace pith {

void read_qwen_sliding_window(ModelConfig& c, const ArchitectureKeys& keys);  // qwen2.cpp

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qk_norm = true;
  read_qwen_sliding_window(c, keys);
}

std::vector<ArchValue> describe(const ModelConfig&) {
  return {};
}

}  // namespace

extern const Architecture kQwen3Architecture{
    .name = "qwen3",
    .gguf_name = "qwen3",
    .hf_class = "Qwen3ForCausalLM",
    .hf_model_type = "qwen3",
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
