// Qwen3.5 MoE (35B-A3B, 122B-A10B, 397B-A17B): Qwen3.5's hybrid layers (qwen35.cpp) with a
// mixture of SwiGLU experts in every layer, softmax router, top-k weights renormalised, plus a
// shared expert scaled by sigmoid(shared_expert_gate . h) (as llama.cpp's qwen35moe graph).
#include "engine/architectures/architecture.h"

namespace pith {

void configure_qwen35(ModelConfig& c, const ArchitectureKeys& keys);  // qwen35.cpp
std::vector<ArchValue> describe_qwen35(const ModelConfig& c);
void read_moe_options(ModelConfig& c, const ArchitectureKeys& keys, bool shared_expert);
std::vector<ArchValue> describe_moe(const ModelConfig& c);  // moe.cpp

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  configure_qwen35(c, keys);
  read_moe_options(c, keys, true);
  c.moe_norm_top_k = keys.flag({"", "norm_topk_prob"}).value_or(true);
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  std::vector<ArchValue> v = describe_qwen35(c);
  for (const ArchValue& m : describe_moe(c)) v.push_back(m);
  return v;
}

}  // namespace

extern const Architecture kQwen35MoeArchitecture{
    .name = "qwen35moe",
    .gguf_name = "qwen35moe",
    .hf_class = "Qwen3_5MoeForCausalLM",
    .hf_model_type = "qwen3_5_moe_text",
    .hf_multimodal_class = "Qwen3_5MoeForConditionalGeneration",
    .hf_names = {.ffn_norm = "post_attention_layernorm"},
    .gguf_ffn_norm = "post_attention_norm",
    .hf_norm_offset = true,
    .partial_rotary = true,
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
