// Which families the CUDA backend accepts (engine/cuda/family_support.h), on the configs of
// model_gen's presets: every option of llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3,
// qwen3.5 and their mixture-of-experts variants is implemented; gemma4 models are named with
// what they lack. No GPU needed.
#include <gtest/gtest.h>

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

TEST(CudaFamilySupport, OtherFamiliesAreNamedWithWhatTheyLack) {
  // gemma4's experts beside its dense FFN (own norms and scales) are not the routed FFN above.
  EXPECT_NE(unsupported_family_options(model_preset("tiny", "gemma4",
                                                    {"enable_moe_block=true", "num_experts=8",
                                                     "top_k_experts=2", "moe_intermediate_size=32"})
                                           .config)
                .find("mixture of experts"),
            std::string::npos);
  const std::string gemma4 = unsupported_family_options(model_preset("tiny", "gemma4").config);
  EXPECT_NE(gemma4, "none");
  EXPECT_EQ(gemma4.find("split-half RoPE"), std::string::npos) << gemma4;  // supported parts
  EXPECT_EQ(gemma4.find("soft-capping"), std::string::npos) << gemma4;
}

}  // namespace
}  // namespace pith::cuda
