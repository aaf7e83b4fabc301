// Which families the CUDA backend accepts (engine/cuda/family_support.h), on the configs of
// model_gen's presets: every option of llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3,
// qwen3.5, gemma4 and their mixture-of-experts variants is implemented. No GPU needed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/cuda/family_support.h"
#include "engine/model_weights.h"
#include "model_gen/model_gen.h"

namespace pith::cuda {
namespace {

TEST(CudaFamilySupport, DenseFamiliesRunEveryOptionTheyUse) {
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
                           "qwen35", "qwen2moe", "qwen3moe", "qwen35moe"}) {
    const ModelConfig c = model_preset("tiny", arch).config;
    EXPECT_EQ(unsupported_family_options(c), "none")
        << arch << " uses " << family_option_summary(c);
  }
  // The named shapes too (real sliding windows, soft-caps, query scales, bases).
  for (const char* name : {"qwen3-0.6b", "gemma3-1b", "llama3.2-1b", "qwen3.5-0.8b",
                           "qwen3-30b-a3b", "qwen1.5-moe-a2.7b"})
    EXPECT_EQ(unsupported_family_options(model_preset(name).config), "none") << name;
  // YaRN RoPE scaling lives in the host-computed RoPE tables.
  const ModelConfig yarn =
      model_preset(
          "tiny", "qwen3",
          {R"(rope_scaling={"rope_type":"yarn","factor":4,"original_max_position_embeddings":6400})"})
          .config;
  ASSERT_EQ(yarn.yarn.factor, 4.0f);
  EXPECT_EQ(unsupported_family_options(yarn), "none") << family_option_summary(yarn);
}

TEST(CudaFamilySupport, Gemma4VariantsRunEveryOptionTheyUse) {
  // The dense tiny shape (global layers of twice the head size, one KV head, V = K, proportional
  // RoPE), the E2B-like one (per-layer embeddings, KV-sharing layers, double-wide FFNs) and the
  // 26B-A4B-like one (experts beside the dense FFN), as tests/data/oracle/arch/variants.json.
  const std::vector<std::vector<std::string>> variants = {
      {},
      {"hidden_size_per_layer_input=8", "num_kv_shared_layers=2", "use_double_wide_mlp=true",
       "attention_k_eq_v=false",
       R"(layer_types=["sliding_attention","sliding_attention","sliding_attention",)"
       R"("full_attention","sliding_attention","full_attention"])"},
      {"enable_moe_block=true", "num_experts=8", "top_k_experts=2", "moe_intermediate_size=32"}};
  for (const auto& options : variants) {
    const ModelConfig c = model_preset("tiny", "gemma4", options).config;
    const std::string used = family_option_summary(c);
    EXPECT_NE(used.find("per-layer attention shapes"), std::string::npos) << used;
    EXPECT_EQ(unsupported_family_options(c), "none") << used;
  }
}

// gpt-oss's options are CPU-only for now: the backend names each of them, so `--device cuda`
// refuses the model with what is missing and auto serves it on the CPU.
TEST(CudaFamilySupport, GptOssIsRefusedByItsOptionNames) {
  for (const char* name : {"tiny", "gpt-oss-20b"}) {
    const ModelConfig c = model_preset(name, "gpt-oss").config;
    const std::string missing = unsupported_family_options(c);
    for (const char* option :
         {"clamped SwiGLU (gpt-oss)", "attention output bias", "attention sinks", "expert biases"})
      EXPECT_NE(missing.find(option), std::string::npos) << name << ": " << missing;
    EXPECT_EQ(missing.find("YaRN"), std::string::npos) << missing;  // the backend has those
    EXPECT_EQ(missing.find("mixture of experts"), std::string::npos) << missing;
  }
}

}  // namespace
}  // namespace pith::cuda
