// Qwen3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (per-head Q/K norms) with a
// routed mixture of SwiGLU experts in every layer, top-k weights renormalised to sum 1, no
// shared expert.
#include "engine/architectures/architecture.h"

namespace pith {

void read_qwen_sliding_window(ModelConfig& c, const ArchitectureKeys& keys);  // qwen2.cpp
void read_moe_options(ModelConfig& c, const ArchitectureKeys& keys, bool shared_expert);
std::vector<ArchValue> describe_moe(const ModelConfig& c);  // moe.cpp

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qk_norm = true;
  read_moe_options(c, keys, false);
  // llama.cpp always renormalises for qwen3moe; HF reads norm_topk_prob (true in every release).
  c.moe_norm_top_k = keys.flag({"", "norm_topk_prob"}).value_or(true);
  read_qwen_sliding_window(c, keys);
}

}  // namespace

extern const Architecture kQwen3MoeArchitecture{
    .name = "qwen3moe",
    .gguf_name = "qwen3moe",
    .hf_class = "Qwen3MoeForCausalLM",
    .hf_model_type = "qwen3_moe",
    .configure = configure,
    .describe = describe_moe,
};

}  // namespace pith
