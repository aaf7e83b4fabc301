// The family registry and the per-layer tensor table shared by both loaders and model gen.
#include "engine/architectures/architecture.h"

#include <fmt/format.h>

#include "common/error.h"

namespace pith {

extern const Architecture kLlamaArchitecture;
extern const Architecture kMistralArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kPhi3Architecture;
extern const Architecture kGemma2Architecture;
extern const Architecture kGemma3Architecture;
extern const Architecture kGemma4Architecture;
extern const Architecture kQwen2MoeArchitecture;
extern const Architecture kQwen3MoeArchitecture;
extern const Architecture kQwen35Architecture;
extern const Architecture kQwen35MoeArchitecture;
extern const Architecture kGptOssArchitecture;

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all = {
      &kLlamaArchitecture,  &kMistralArchitecture,   &kQwen2Architecture,
      &kQwen3Architecture,  &kPhi3Architecture,      &kGemma2Architecture,
      &kGemma3Architecture, &kQwen2MoeArchitecture,  &kQwen3MoeArchitecture,
      &kQwen35Architecture, &kQwen35MoeArchitecture, &kGemma4Architecture,
      &kGptOssArchitecture};
  return all;
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture* a : architectures())
    if (a->name == name) return a;
  return nullptr;
}

const Architecture* architecture_for_gguf(std::string_view gguf_name) {
  for (const Architecture* a : architectures())  // llama first: Mistral GGUFs say "llama"
    if (a->gguf_name == gguf_name) return a;
  return nullptr;
}

const Architecture* architecture_for_hf(std::string_view hf_class, std::string_view model_type) {
  for (const Architecture* a : architectures())
    if (hf_class.empty()
            ? a->hf_model_type == model_type ||
                  (!a->hf_sibling_model_type.empty() && a->hf_sibling_model_type == model_type)
            : a->hf_class == hf_class || a->hf_multimodal_class == hf_class ||
                  (!a->hf_sibling_class.empty() && a->hf_sibling_class == hf_class))
      return a;
  return nullptr;
}

std::string supported_architecture_names() {
  std::string out;
  for (const Architecture* a : architectures())
    out += (out.empty() ? "" : ", ") + std::string(a->name);
  return out;
}

std::string supported_hf_classes() {
  std::string out;
  for (const Architecture* a : architectures()) {
    out += (out.empty() ? "" : ", ") + std::string(a->hf_class);
    if (!a->hf_sibling_class.empty()) out += ", " + std::string(a->hf_sibling_class);
  }
  return out;
}

std::vector<LayerTensor> layer_tensors(const Architecture& arch, const ModelConfig& c,
                                       uint32_t layer) {
  using R = LayerTensor::Role;
  const std::string g = fmt::format("blk.{}.", layer), h = fmt::format("model.layers.{}.", layer);
  const bool permute = c.rope_style == RopeStyle::AdjacentPairs;
  const size_t d = c.d_model;
  std::vector<LayerTensor> t;
  auto matrix = [&](R role, std::string_view gg, std::string_view hh, size_t rows, size_t cols,
                    bool rotary = false) {
    t.push_back(
        {role, g + std::string(gg), h + std::string(hh), rows, cols, false, rotary && permute});
  };
  auto vector = [&](R role, std::string_view gg, std::string_view hh, size_t n, bool norm) {
    t.push_back({role, g + std::string(gg), h + std::string(hh), 1, n, norm, false});
  };
  // Softmax attention: Q (with its output gate where the family has one), K, V, biases and
  // head norms, output projection, post-norm.
  // Per-layer shapes: gemma4's global layers differ from its sliding ones, and its KV-sharing
  // layers have no K/V projections.
  const size_t q_dim = c.q_dim_of(layer), kv_dim = c.kv_dim_of(layer), hd = c.head_dim_of(layer);
  const bool kv = c.layer_has_kv(layer);
  auto attention_tensors = [&] {
    const size_t q_rows = c.attn_output_gate ? 2 * q_dim : q_dim;
    if (arch.fused_qkv) {
      matrix(R::Qkv, "attn_qkv.weight", "self_attn.qkv_proj.weight", q_dim + 2 * kv_dim, d);
    } else {
      matrix(R::Q, "attn_q.weight", "self_attn.q_proj.weight", q_rows, d, true);
      if (kv) matrix(R::K, "attn_k.weight", "self_attn.k_proj.weight", kv_dim, d, true);
      if (kv && !c.layer_v_from_k(layer))
        matrix(R::V, "attn_v.weight", "self_attn.v_proj.weight", kv_dim, d);
    }
    if (c.qkv_bias) {
      vector(R::QBias, "attn_q.bias", "self_attn.q_proj.bias", q_dim, false);
      vector(R::KBias, "attn_k.bias", "self_attn.k_proj.bias", kv_dim, false);
      vector(R::VBias, "attn_v.bias", "self_attn.v_proj.bias", kv_dim, false);
    }
    if (c.qk_norm) {
      vector(R::QNorm, "attn_q_norm.weight", "self_attn.q_norm.weight", hd, true);
      if (kv) vector(R::KNorm, "attn_k_norm.weight", "self_attn.k_norm.weight", hd, true);
    }
    matrix(R::AttnOut, "attn_output.weight", "self_attn.o_proj.weight", d, q_dim);
    if (c.attn_out_bias)
      vector(R::AttnOutBias, "attn_output.bias", "self_attn.o_proj.bias", d, false);
    if (c.attn_sinks)
      vector(R::AttnSinks, "attn_sinks.weight", "self_attn.sinks", c.n_heads, false);
    if (c.post_norms)
      vector(R::PostAttnNorm, "post_attention_norm.weight",
             std::string(arch.hf_names.post_attn_norm) + ".weight", d, true);
  };
  vector(R::AttnNorm, "attn_norm.weight", "input_layernorm.weight", d, true);
  if (c.layer_recurrent(layer)) {
    const DeltaNetConfig& dn = c.delta_net;
    const size_t hv = dn.v_heads;
    auto by_value_head = [&](size_t first, size_t block, bool cols = false) {
      t.back().v_first = first, t.back().v_block = block, t.back().v_cols = cols;
    };
    matrix(R::SsmQkv, "attn_qkv.weight", "linear_attn.in_proj_qkv.weight", dn.conv_channels(), d);
    by_value_head(2 * size_t{dn.key_dim()}, dn.v_dim);
    matrix(R::SsmGate, "attn_gate.weight", "linear_attn.in_proj_z.weight", dn.value_dim(), d);
    by_value_head(0, dn.v_dim);
    matrix(R::SsmBeta, "ssm_beta.weight", "linear_attn.in_proj_b.weight", hv, d);
    by_value_head(0, 1);
    matrix(R::SsmAlpha, "ssm_alpha.weight", "linear_attn.in_proj_a.weight", hv, d);
    by_value_head(0, 1);
    t.push_back({R::SsmConv, g + "ssm_conv1d.weight", h + "linear_attn.conv1d.weight",
                 dn.conv_channels(), dn.conv_kernel});
    t.back().conv = true;
    by_value_head(2 * size_t{dn.key_dim()}, dn.v_dim);
    vector(R::SsmDtBias, "ssm_dt.bias", "linear_attn.dt_bias", hv, false);
    by_value_head(0, 1, true);
    vector(R::SsmA, "ssm_a", "linear_attn.A_log", hv, false);
    t.back().hf_log_decay = true;
    by_value_head(0, 1, true);
    vector(R::SsmNorm, "ssm_norm.weight", "linear_attn.norm.weight", dn.v_dim, true);
    t.back().hf_plain = true;
    matrix(R::SsmOut, "ssm_out.weight", "linear_attn.out_proj.weight", d, dn.value_dim());
    by_value_head(0, dn.v_dim, true);
  } else {
    attention_tensors();
  }
  const HfLayerNames& n = arch.hf_names;
  vector(R::FfnNorm, std::string(arch.gguf_ffn_norm) + ".weight",
         std::string(n.ffn_norm) + ".weight", d, true);
  if (c.n_experts > 0 && !c.moe_beside_dense) {
    const size_t e = c.n_experts, ff = c.d_ff_expert, sh = c.d_ff_shared_expert;
    matrix(R::Router, "ffn_gate_inp.weight", "mlp.gate.weight", e, d);
    if (c.moe_bias) vector(R::RouterBias, "ffn_gate_inp.bias", "mlp.router.bias", e, false);
    auto experts = [&](R role, std::string_view gg, std::string_view hh, size_t rows, size_t cols) {
      t.push_back(
          {role, g + std::string(gg), h + std::string(hh), rows, cols, false, false, c.n_experts});
    };
    auto bias_table = [&](R role, std::string_view gg, size_t width) {
      t.push_back({role, g + std::string(gg), h + std::string(gg), e, width});
      t.back().f32_table = true;
    };
    experts(R::ExpertGate, "ffn_gate_exps.weight", "mlp.experts.{}.gate_proj.weight", ff, d);
    if (c.moe_bias) bias_table(R::ExpertGateBias, "ffn_gate_exps.bias", ff);
    experts(R::ExpertUp, "ffn_up_exps.weight", "mlp.experts.{}.up_proj.weight", ff, d);
    if (c.moe_bias) bias_table(R::ExpertUpBias, "ffn_up_exps.bias", ff);
    experts(R::ExpertDown, "ffn_down_exps.weight", "mlp.experts.{}.down_proj.weight", d, ff);
    if (c.moe_bias) bias_table(R::ExpertDownBias, "ffn_down_exps.bias", d);
    if (sh > 0) {
      t.push_back({R::SharedGateInp, g + "ffn_gate_inp_shexp.weight",
                   h + "mlp.shared_expert_gate.weight", 1, d, false, false, 0, true});
      matrix(R::SharedGate, "ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", sh, d);
      matrix(R::SharedUp, "ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", sh, d);
      matrix(R::SharedDown, "ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", d, sh);
    }
  } else if (arch.fused_gate_up) {
    matrix(R::GateUp, "ffn_up.weight", "mlp.gate_up_proj.weight", 2 * size_t{c.d_ff}, d);
  } else {
    matrix(R::Gate, "ffn_gate.weight", "mlp.gate_proj.weight", c.d_ff_of(layer), d);
    matrix(R::Up, "ffn_up.weight", "mlp.up_proj.weight", c.d_ff_of(layer), d);
  }
  if (c.dense_ffn())
    matrix(R::Down, "ffn_down.weight", "mlp.down_proj.weight", d, c.d_ff_of(layer));
  if (c.post_norms)
    vector(R::PostFfnNorm, "post_ffw_norm.weight", std::string(n.post_ffn_norm) + ".weight", d,
           true);
  if (c.moe_beside_dense) {  // gemma4 26B-A4B: experts beside the dense FFN
    const size_t e = c.n_experts, ff = c.d_ff_expert;
    matrix(R::Router, "ffn_gate_inp.weight", "router.proj.weight", e, d);
    vector(R::RouterScale, "ffn_gate_inp.scale", "router.scale", d, false);
    vector(R::ExpertScale, "ffn_down_exps.scale", "router.per_expert_scale", e, false);
    auto stacked = [&](R role, std::string_view gg, std::string_view hh, size_t rows, size_t cols) {
      t.push_back(
          {role, g + std::string(gg), h + std::string(hh), rows, cols, false, false, c.n_experts});
      t.back().hf_stacked = true;
    };
    stacked(R::ExpertGateUp, "ffn_gate_up_exps.weight", "experts.gate_up_proj", 2 * ff, d);
    stacked(R::ExpertDown, "ffn_down_exps.weight", "experts.down_proj", d, ff);
    vector(R::PreFfnNorm2, "pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight", d, true);
    vector(R::PostFfnNorm1, "post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight", d,
           true);
    vector(R::PostFfnNorm2, "post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight", d,
           true);
  }
  if (c.d_per_layer_input > 0) {
    matrix(R::PleGate, "inp_gate.weight", "per_layer_input_gate.weight", c.d_per_layer_input, d);
    matrix(R::PleProj, "proj.weight", "per_layer_projection.weight", d, c.d_per_layer_input);
    vector(R::PlePostNorm, "post_norm.weight", "post_per_layer_input_norm.weight", d, true);
  }
  if (c.layer_scale) vector(R::LayerScale, "layer_output_scale.weight", "layer_scalar", 1, false);
  return t;
}

size_t hf_to_tiled_index(size_t i, size_t v_first, size_t v_block, const DeltaNetConfig& dn) {
  if (v_block == 0 || i < v_first || dn.k_heads == 0) return i;
  const size_t group = dn.v_heads / dn.k_heads, h = (i - v_first) / v_block;
  return v_first + ((h % group) * dn.k_heads + h / group) * v_block + (i - v_first) % v_block;
}

uint32_t required_size(const ArchitectureKeys& keys, ArchKey key) {
  std::optional<double> v = keys.number(key);
  if (!v) fail("{}: missing '{}'", keys.source(), keys.is_gguf() ? key.gguf : key.hf);
  if (*v < 1 || *v > 65536 || *v != static_cast<uint32_t>(*v))
    fail("{}: '{}' = {} is not a size", keys.source(), keys.is_gguf() ? key.gguf : key.hf, *v);
  return static_cast<uint32_t>(*v);
}

void refuse_attention_bias(const ArchitectureKeys& keys) {
  if (keys.flag({"", "attention_bias"}).value_or(false))
    fail(
        "{}: attention_bias = true (biases on q/k/v/o projections) is not supported for this "
        "architecture",
        keys.source());
}

void read_sliding_window(ModelConfig& c, const ArchitectureKeys& keys, ArchKey window_key,
                         uint32_t pattern) {
  std::optional<double> w = keys.number(window_key);
  if (!w || *w <= 0) return;
  if (*w > double(UINT32_MAX)) fail("{}: sliding window {} is out of range", keys.source(), *w);
  c.sliding_window = static_cast<uint32_t>(*w);
  c.sliding_layers.assign(c.n_layers, 1);
  if (auto types = keys.layer_types()) {
    if (types->size() != c.n_layers)
      fail("{}: layer_types has {} entries for {} layers", keys.source(), types->size(),
           c.n_layers);
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      const std::string& ty = (*types)[l];
      if (ty != "sliding_attention" && ty != "full_attention")
        fail("{}: layer_types[{}] = '{}' is not supported (sliding_attention, full_attention)",
             keys.source(), l, ty);
      c.sliding_layers[l] = ty == "sliding_attention";
    }
    return;
  }
  if (pattern > 0)
    for (uint32_t l = 0; l < c.n_layers; ++l) c.sliding_layers[l] = (l + 1) % pattern != 0;
}

}  // namespace pith
