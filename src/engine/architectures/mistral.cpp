// Mistral: Llama's layers with sliding-window attention on every layer where the config sets
// `sliding_window` (Mistral 7B v0.1: 4096; null from v0.2 on). Its GGUF files use the `llama`
// architecture (llama.cpp converts them so), with the window as llama.attention.sliding_window.
#include "engine/architectures/architecture.h"

namespace pith {

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::AdjacentPairs;
  refuse_attention_bias(keys);
  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"}, 0);
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  return {{{"attention.sliding_window", "sliding_window"}, double(c.sliding_window), true}};
}

}  // namespace

extern const Architecture kMistralArchitecture{
    .name = "mistral",
    .gguf_name = "llama",
    .hf_class = "MistralForCausalLM",
    .hf_model_type = "mistral",
    .hf_sibling_class = "MinistralForCausalLM",
    .hf_sibling_model_type = "ministral",
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
