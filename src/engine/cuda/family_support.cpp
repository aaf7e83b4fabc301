// The CUDA backend's family coverage. See family_support.h.
#include "engine/cuda/family_support.h"

#include "engine/model_weights.h"

namespace pith::cuda {

std::string unsupported_family_options(const ModelConfig& config) {
  // Reset what the backend implements to llama's values; whatever family_option_summary still
  // names is missing. A new option added there is therefore unsupported until handled here.
  ModelConfig c = config;
  c.rope_style = RopeStyle::AdjacentPairs;
  if (c.ffn_activation == FfnActivation::GeluTanh) c.ffn_activation = FfnActivation::Silu;
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
  c.longrope = {};             // LongRoPE: its factors and attention factor in those tables too
  c.recurrent_layers.clear();  // Gated DeltaNet layers (recurrent_layers.h)
  c.n_experts = 0;             // routed experts, also beside a dense FFN (moe_layers.h)
  c.moe_beside_dense = false;
  // gemma4: per-layer KV shapes in the pool (paged_kv.h) and attention up to head_dim 512,
  // V = K, weightless V norms, KV-sharing layers, double-wide FFNs, layer output scales and
  // per-layer token embeddings (per_layer_inputs.h).
  c.global_head_dim = 0;
  c.global_kv_heads = 0;
  c.global_v_from_k = false;
  c.n_kv_shared_layers = 0;
  c.rope_dim_local = 0;
  c.v_norm = false;
  c.layer_scale = false;
  c.double_wide_shared_ffn = false;
  c.d_per_layer_input = 0;
  return family_option_summary(c);
}

}  // namespace pith::cuda
