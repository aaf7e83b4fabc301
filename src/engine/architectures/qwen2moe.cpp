// Qwen2 MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (Q/K/V bias) with a routed
// mixture of SwiGLU experts whose top-k softmax weights are used as they are (not
// renormalised), plus a shared expert scaled by sigmoid(shared_expert_gate . h).
#include "engine/architectures/architecture.h"

namespace pith {

void read_qwen_sliding_window(ModelConfig& c, const ArchitectureKeys& keys);  // qwen2.cpp
void read_moe_options(ModelConfig& c, const ArchitectureKeys& keys, bool shared_expert);
std::vector<ArchValue> describe_moe(const ModelConfig& c);  // moe.cpp

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qkv_bias = true;
  read_moe_options(c, keys, true);
  c.moe_norm_top_k = keys.flag({"", "norm_topk_prob"}).value_or(false);
  read_qwen_sliding_window(c, keys);
}

}  // namespace

extern const Architecture kQwen2MoeArchitecture{
    .name = "qwen2moe",
    .gguf_name = "qwen2moe",
    .hf_class = "Qwen2MoeForCausalLM",
    .hf_model_type = "qwen2_moe",
    .configure = configure,
    .describe = describe_moe,
};

}  // namespace pith
