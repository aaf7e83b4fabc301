// The CUDA backend's family coverage. See family_support.h.
#include "engine/cuda/family_support.h"

#include "engine/model_weights.h"

namespace pith::cuda {

std::string unsupported_family_options(const ModelConfig& config) {
  // Reset what the backend implements to llama's values; whatever family_option_summary still
  // names is missing. A new option added there is therefore unsupported until handled here.
  ModelConfig c = config;
  c.rope_style = RopeStyle::AdjacentPairs;
  c.ffn_activation = FfnActivation::Silu;
  c.qkv_bias = false;
  c.qk_norm = false;
  c.post_norms = false;
  c.embed_scale = 1.0f;
  c.attn_scale = 0;
  c.attn_softcap = 0;
  c.final_softcap = 0;
  c.sliding_window = 0;
  c.rope_theta_local = 0;
  c.rope_dim = 0;              // partial rotary: the RoPE kernel turns the first rope_dim / 2 pairs
  c.attn_output_gate = false;  // qwen3.5's query gate
  c.yarn = {};                 // YaRN: in the host-computed RoPE tables (engine/rope.h)
  c.recurrent_layers.clear();  // Gated DeltaNet layers (recurrent_layers.h)
  // Routed experts (moe_layers.h); not gemma4's experts beside a dense FFN, with their own norms
  // and scales, which family_option_summary names separately.
  if (!c.moe_beside_dense) c.n_experts = 0;
  return family_option_summary(c);
}

}  // namespace pith::cuda
