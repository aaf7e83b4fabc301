// Qwen3.5 (dense): a hybrid of Gated DeltaNet linear-attention layers (three of every four) and
// full softmax-attention layers. The attention layers are Qwen3's (per-head Q/K RMSNorm,
// split-half RoPE) with partial rotary (a quarter of each head turns), a query projection that
// also yields a sigmoid output gate per head, and head_dim 256. The linear layers keep a
// recurrent state per sequence (engine/gated_delta_net.h). Norms are Gemma-style (1 + w) in the
// HF checkpoint, except the DeltaNet's gated output norm; llama.cpp's converter stores w.
//
// The layer pattern comes from HF `layer_types` or GGUF `attention.recurrent_layers`, else
// every `full_attention_interval`-th layer (default 4) is full attention. Value heads: llama.cpp's
// converter orders them so that value head h reads key head h % k_heads; HF groups them by key
// head, and its tensors are reordered so at load (hf_to_tiled_index).
#include <algorithm>

#include "common/error.h"
#include "engine/architectures/architecture.h"

namespace pith {

void configure_qwen35(ModelConfig& c, const ArchitectureKeys& keys);  // also for qwen35moe.cpp
std::vector<ArchValue> describe_qwen35(const ModelConfig& c);

void configure_qwen35(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qk_norm = true;
  c.attn_output_gate = true;
  if (!keys.flag({"", "attn_output_gate"}).value_or(true))
    fail(
        "{}: attn_output_gate = false is not supported (Qwen3.5's attention layers gate their "
        "output)",
        keys.source());
  refuse_attention_bias(keys);
  DeltaNetConfig& dn = c.delta_net;
  dn.conv_kernel = required_size(keys, {"ssm.conv_kernel", "linear_conv_kernel_dim"});
  dn.k_dim = required_size(keys, {"ssm.state_size", "linear_key_head_dim"});
  dn.k_heads = required_size(keys, {"ssm.group_count", "linear_num_key_heads"});
  dn.v_heads = required_size(keys, {"ssm.time_step_rank", "linear_num_value_heads"});
  if (keys.is_gguf()) {
    const uint32_t inner = required_size(keys, {"ssm.inner_size", ""});
    if (inner % dn.v_heads != 0)
      fail("{}: ssm.inner_size {} is not a multiple of ssm.time_step_rank {}", keys.source(), inner,
           dn.v_heads);
    dn.v_dim = inner / dn.v_heads;
  } else {
    dn.v_dim = required_size(keys, {"", "linear_value_head_dim"});
  }
  if (dn.v_heads % dn.k_heads != 0)
    fail("{}: {} value heads are not a multiple of {} key heads", keys.source(), dn.v_heads,
         dn.k_heads);
  if (dn.conv_kernel < 2) fail("{}: conv kernel {} is too short", keys.source(), dn.conv_kernel);

  c.recurrent_layers.assign(c.n_layers, 0);
  if (auto types = keys.layer_types()) {
    // GGUF files list the multi-token-prediction blocks after the decoder layers (attention
    // blocks, which the forward pass does not run).
    if (keys.is_gguf() && types->size() > c.n_layers &&
        std::all_of(types->begin() + c.n_layers, types->end(),
                    [](const std::string& t) { return t == "full_attention"; }))
      types->resize(c.n_layers);
    if (types->size() != c.n_layers)
      fail("{}: layer_types has {} entries for {} layers", keys.source(), types->size(),
           c.n_layers);
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      const std::string& ty = (*types)[l];
      if (ty != "linear_attention" && ty != "full_attention")
        fail("{}: layer_types[{}] = '{}' is not supported (linear_attention, full_attention)",
             keys.source(), l, ty);
      c.recurrent_layers[l] = ty == "linear_attention";
    }
  } else {
    const double interval =
        keys.number({"full_attention_interval", "full_attention_interval"}).value_or(4);
    if (interval < 1 || interval != static_cast<uint32_t>(interval))
      fail("{}: full_attention_interval {} is not a positive integer", keys.source(), interval);
    for (uint32_t l = 0; l < c.n_layers; ++l)
      c.recurrent_layers[l] = (l + 1) % static_cast<uint32_t>(interval) != 0;
  }
}

std::vector<ArchValue> describe_qwen35(const ModelConfig& c) {
  const DeltaNetConfig& dn = c.delta_net;
  return {{{"ssm.conv_kernel", "linear_conv_kernel_dim"}, double(dn.conv_kernel), true},
          {{"ssm.state_size", "linear_key_head_dim"}, double(dn.k_dim), true},
          {{"ssm.group_count", "linear_num_key_heads"}, double(dn.k_heads), true},
          {{"ssm.time_step_rank", "linear_num_value_heads"}, double(dn.v_heads), true},
          {{"ssm.inner_size", ""}, double(dn.value_dim()), true},
          {{"", "linear_value_head_dim"}, double(dn.v_dim), true}};
}

extern const Architecture kQwen35Architecture{
    .name = "qwen35",
    .gguf_name = "qwen35",
    .hf_class = "Qwen3_5ForCausalLM",
    .hf_model_type = "qwen3_5_text",
    .hf_multimodal_class = "Qwen3_5ForConditionalGeneration",
    .hf_names = {.ffn_norm = "post_attention_layernorm"},
    .gguf_ffn_norm = "post_attention_norm",
    .hf_norm_offset = true,
    .partial_rotary = true,
    .configure = configure_qwen35,
    .describe = describe_qwen35,
};

}  // namespace pith
