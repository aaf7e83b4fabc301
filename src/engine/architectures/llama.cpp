// Llama (1-3.x) and every file that calls itself `llama` in GGUF, Mistral 7B included: the
// reference semantics of the engine (docs/engine.md); no options beyond the common shapes.
#include "engine/architectures/architecture.h"

namespace pith {

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::AdjacentPairs;
  refuse_attention_bias(keys);
  // Mistral GGUFs say "llama"; a window, when a file records one, applies to every layer.
  read_sliding_window(c, keys, {"attention.sliding_window", ""}, 0);
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  if (c.sliding_window == 0) return {};
  return {{{"attention.sliding_window", ""}, double(c.sliding_window), true}};
}

}  // namespace

extern const Architecture kLlamaArchitecture{
    .name = "llama",
    .gguf_name = "llama",
    .hf_class = "LlamaForCausalLM",
    .hf_model_type = "llama",
    .configure = configure,
    .describe = describe,
};

}  // namespace pith
