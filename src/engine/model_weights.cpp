// Size accounting over a loaded model's matrices.
#include "engine/model_weights.h"

#include <fmt/ranges.h>

#include <cmath>

#include "common/error.h"

namespace pith {

void for_each_weight_matrix(const ModelWeights& w,
                            const std::function<void(const WeightMatrix&)>& fn) {
  fn(w.token_embd);
  for (const WeightMatrix* m : {&w.per_layer.token_embd, &w.per_layer.model_proj})
    if (m->data) fn(*m);
  for (const auto& l : w.layers) {
    for (const WeightMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.sh_gate,
          &l.sh_up, &l.sh_down, &l.ssm_qkv, &l.ssm_gate, &l.ssm_beta, &l.ssm_alpha, &l.ssm_out,
          &l.ple_gate, &l.ple_proj})
      if (m->data) fn(*m);
    for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (const WeightMatrix& m : *experts) fn(m);
  }
  if (!w.config.tied_output) fn(w.output);
}

size_t ModelWeights::weight_bytes() const {
  size_t bytes = 0;
  for_each_weight_matrix(*this, [&](const WeightMatrix& m) { bytes += m.rows * m.row_bytes(); });
  return bytes;
}

size_t ModelWeights::active_weight_bytes() const {
  size_t bytes = weight_bytes();
  const ModelConfig& c = config;
  if (c.n_experts == 0) return bytes;
  for (const auto& l : layers)
    for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (size_t e = c.n_experts_used; e < experts->size(); ++e)  // experts are equal in size
        bytes -= (*experts)[e].rows * (*experts)[e].row_bytes();
  return bytes;
}

size_t ModelWeights::n_params() const {
  size_t n = 0;
  for_each_weight_matrix(*this, [&](const WeightMatrix& m) { n += m.rows * m.cols; });
  n += output_norm.size() + per_layer.proj_norm.size();
  for (const auto& l : layers)
    for (const auto* v : {&l.attn_norm,
                          &l.ffn_norm,
                          &l.bq,
                          &l.bk,
                          &l.bv,
                          &l.q_norm,
                          &l.k_norm,
                          &l.post_attn_norm,
                          &l.post_ffn_norm,
                          &l.sh_gate_inp,
                          &l.ssm_conv_t,
                          &l.ssm_dt_bias,
                          &l.ssm_a,
                          &l.ssm_norm,
                          &l.ple_post_norm,
                          &l.router_scale,
                          &l.expert_scale,
                          &l.pre_ffn_norm2,
                          &l.post_ffn_norm1,
                          &l.post_ffn_norm2,
                          &l.bo,
                          &l.sinks,
                          &l.router_bias,
                          &l.exp_gate_bias,
                          &l.exp_up_bias,
                          &l.exp_down_bias})
      n += v->size();
  return n;
}

std::string family_option_summary(const ModelConfig& c) {
  std::vector<std::string> used;
  if (c.rope_style != RopeStyle::AdjacentPairs) used.push_back("split-half RoPE");
  if (c.ffn_activation == FfnActivation::GeluTanh) used.push_back("GELU-tanh FFN");
  if (c.ffn_activation == FfnActivation::SwigluOai) used.push_back("clamped SwiGLU (gpt-oss)");
  if (c.attn_out_bias) used.push_back("attention output bias");
  if (c.attn_sinks) used.push_back("attention sinks");
  if (c.moe_bias) used.push_back("expert biases");
  if (c.qkv_bias) used.push_back("Q/K/V bias");
  if (c.qk_norm) used.push_back("Q/K norms");
  if (c.post_norms) used.push_back("post-norms");
  if (c.embed_scale != 1.0f) used.push_back("scaled embeddings");
  if (c.attn_scale > 0) used.push_back("custom query scale");
  if (c.attn_softcap > 0 || c.final_softcap > 0) used.push_back("soft-capping");
  if (c.sliding_window > 0) used.push_back("sliding-window attention");
  if (c.rope_theta_local > 0) used.push_back("a second RoPE base");
  if (c.n_experts > 0) used.push_back("mixture of experts");
  if (c.rope_dim > 0 && c.rope_dim != c.head_dim) used.push_back("partial rotary");
  if (c.attn_output_gate) used.push_back("gated attention output");
  if (c.hybrid()) used.push_back("Gated DeltaNet layers");
  if (!c.uniform_attention()) used.push_back("per-layer attention shapes");
  if (c.v_norm) used.push_back("V norms");
  if (c.layer_scale) used.push_back("layer output scales");
  if (c.double_wide_shared_ffn) used.push_back("per-layer FFN widths");
  if (c.d_per_layer_input > 0) used.push_back("per-layer token embeddings");
  if (c.yarn.factor > 0) used.push_back("YaRN RoPE scaling");
  if (c.longrope.enabled()) used.push_back("LongRoPE scaling");
  return used.empty() ? "none" : fmt::format("{}", fmt::join(used, ", "));
}

void place_layer_vector(LayerWeights& l, LayerTensor::Role role, std::vector<float> v,
                        const ModelConfig& c) {
  using R = LayerTensor::Role;
  switch (role) {
    case R::SsmConv: {
      const size_t channels = c.delta_net.conv_channels(), kernel = c.delta_net.conv_kernel;
      if (v.size() != channels * kernel)
        fail("conv kernel has {} values, expected {}", v.size(), channels * kernel);
      l.ssm_conv_t.resize(v.size());
      for (size_t ch = 0; ch < channels; ++ch)
        for (size_t i = 0; i < kernel; ++i) l.ssm_conv_t[i * channels + ch] = v[ch * kernel + i];
      return;
    }
    case R::SsmDtBias:
      l.ssm_dt_bias = std::move(v);
      return;
    case R::SsmA:
      l.ssm_a = std::move(v);
      return;
    case R::SsmNorm:
      l.ssm_norm = std::move(v);
      return;
    case R::AttnNorm:
      l.attn_norm = std::move(v);
      return;
    case R::QBias:
      l.bq = std::move(v);
      return;
    case R::KBias:
      l.bk = std::move(v);
      return;
    case R::VBias:
      l.bv = std::move(v);
      return;
    case R::QNorm:
      l.q_norm = std::move(v);
      return;
    case R::KNorm:
      l.k_norm = std::move(v);
      return;
    case R::PostAttnNorm:
      l.post_attn_norm = std::move(v);
      return;
    case R::FfnNorm:
      l.ffn_norm = std::move(v);
      return;
    case R::PostFfnNorm:
      l.post_ffn_norm = std::move(v);
      return;
    case R::SharedGateInp:
      l.sh_gate_inp = std::move(v);
      return;
    case R::PlePostNorm:
      l.ple_post_norm = std::move(v);
      return;
    case R::RouterScale:
      l.router_scale = std::move(v);
      return;
    case R::ExpertScale:
      l.expert_scale = std::move(v);
      return;
    case R::AttnOutBias:
      l.bo = std::move(v);
      return;
    case R::AttnSinks:
      l.sinks = std::move(v);
      return;
    case R::RouterBias:
      l.router_bias = std::move(v);
      return;
    case R::ExpertGateBias:
      l.exp_gate_bias = std::move(v);
      return;
    case R::ExpertUpBias:
      l.exp_up_bias = std::move(v);
      return;
    case R::ExpertDownBias:
      l.exp_down_bias = std::move(v);
      return;
    case R::PreFfnNorm2:
      l.pre_ffn_norm2 = std::move(v);
      return;
    case R::PostFfnNorm1:
      l.post_ffn_norm1 = std::move(v);
      return;
    case R::PostFfnNorm2:
      l.post_ffn_norm2 = std::move(v);
      return;
    case R::LayerScale:
      if (v.size() != 1 || !std::isfinite(v[0]))
        fail("layer output scale: {} values, expected one finite value", v.size());
      l.layer_scale = v[0];
      return;
    default:
      fail("layer tensor role {} is not a vector", static_cast<int>(role));
  }
}

void place_layer_matrix(LayerWeights& l, LayerTensor::Role role, const WeightMatrix& m,
                        const ModelConfig& c) {
  using R = LayerTensor::Role;
  auto rows = [&](size_t first, size_t n) {
    return WeightMatrix{m.dtype, n, m.cols, m.row(first)};
  };
  switch (role) {
    case R::Q:
      l.wq = m;
      return;
    case R::K:
      l.wk = m;
      return;
    case R::V:
      l.wv = m;
      return;
    case R::Qkv:
      l.wq = rows(0, c.q_dim());
      l.wk = rows(c.q_dim(), c.kv_dim());
      l.wv = rows(size_t{c.q_dim()} + c.kv_dim(), c.kv_dim());
      return;
    case R::AttnOut:
      l.wo = m;
      return;
    case R::Gate:
      l.w_gate = m;
      return;
    case R::Up:
      l.w_up = m;
      return;
    case R::GateUp:
      l.w_gate = rows(0, c.d_ff);
      l.w_up = rows(c.d_ff, c.d_ff);
      return;
    case R::Down:
      l.w_down = m;
      return;
    case R::Router:
      l.router = m;
      return;
    case R::SharedGate:
      l.sh_gate = m;
      return;
    case R::SharedUp:
      l.sh_up = m;
      return;
    case R::SharedDown:
      l.sh_down = m;
      return;
    case R::SsmQkv:
      l.ssm_qkv = m;
      return;
    case R::SsmGate:
      l.ssm_gate = m;
      return;
    case R::SsmBeta:
      l.ssm_beta = m;
      return;
    case R::SsmAlpha:
      l.ssm_alpha = m;
      return;
    case R::SsmOut:
      l.ssm_out = m;
      return;
    case R::PleGate:
      l.ple_gate = m;
      return;
    case R::PleProj:
      l.ple_proj = m;
      return;
    default:
      fail("layer tensor role {} is not a matrix", static_cast<int>(role));
  }
}

void place_layer_expert(LayerWeights& l, LayerTensor::Role role, uint32_t expert,
                        const WeightMatrix& m, const ModelConfig& c) {
  using R = LayerTensor::Role;
  if (role == R::ExpertGateUp) {  // gate rows first, then up
    if (m.rows % 2 != 0) fail("fused expert gate/up has an odd row count {}", m.rows);
    const size_t half = m.rows / 2;
    place_layer_expert(l, R::ExpertGate, expert, {m.dtype, half, m.cols, m.row(0)}, c);
    place_layer_expert(l, R::ExpertUp, expert, {m.dtype, half, m.cols, m.row(half)}, c);
    return;
  }
  std::vector<WeightMatrix>* v = role == R::ExpertGate   ? &l.exp_gate
                                 : role == R::ExpertUp   ? &l.exp_up
                                 : role == R::ExpertDown ? &l.exp_down
                                                         : nullptr;
  if (!v) fail("layer tensor role {} is not an expert matrix", static_cast<int>(role));
  if (v->size() != c.n_experts) v->resize(c.n_experts);
  if (expert >= c.n_experts) fail("expert {} of {}", expert, c.n_experts);
  (*v)[expert] = m;
}

namespace {

void check_matrix(const WeightMatrix& m, size_t rows, size_t cols, const char* name, size_t layer) {
  if (m.data == nullptr || m.rows != rows || m.cols != cols)
    fail("engine: weight {} (layer {}) is [{}][{}]{}, expected [{}][{}]", name, layer, m.rows,
         m.cols, m.data ? "" : " without data", rows, cols);
}

void check_vector(const std::vector<float>& v, size_t n, const char* name, size_t layer) {
  if (v.size() != n)
    fail("engine: {} (layer {}) has {} entries, expected {}", name, layer, v.size(), n);
}

}  // namespace

void validate_model_shapes(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  if (c.n_layers == 0 || c.d_model == 0 || c.n_heads == 0 || c.n_kv_heads == 0 || c.head_dim == 0 ||
      c.d_ff == 0 || c.vocab_size == 0)
    fail("engine: model '{}' has an empty dimension", w.source);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("engine: {} query heads is not a multiple of {} KV heads", c.n_heads, c.n_kv_heads);
  if (!c.recurrent_layers.empty() && c.recurrent_layers.size() != c.n_layers)
    fail("engine: recurrent-layer flags for {} layers, model has {}", c.recurrent_layers.size(),
         c.n_layers);
  if (c.hybrid() && c.n_kv_layers() == 0)
    fail("engine: hybrid model '{}' has no attention layer", w.source);
  if (c.sliding_window > 0 && c.sliding_layers.size() != c.n_layers)
    fail("engine: sliding-window flags for {} layers, model has {}", c.sliding_layers.size(),
         c.n_layers);
  if (w.layers.size() != c.n_layers)
    fail("engine: model has {} layers of weights, config says {}", w.layers.size(), c.n_layers);
  check_matrix(w.token_embd, c.vocab_size, c.d_model, "token_embd", 0);
  check_matrix(w.output, c.vocab_size, c.d_model, "output", 0);
  check_vector(w.output_norm, c.d_model, "output_norm", 0);
  if (c.d_per_layer_input > 0) {
    const size_t all = size_t{c.n_layers} * c.d_per_layer_input;
    check_matrix(w.per_layer.token_embd, c.vocab_size, all, "per_layer_token_embd", 0);
    check_matrix(w.per_layer.model_proj, all, c.d_model, "per_layer_model_proj", 0);
    check_vector(w.per_layer.proj_norm, c.d_per_layer_input, "per_layer_proj_norm", 0);
  }
  for (size_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    check_vector(L.attn_norm, c.d_model, "attn_norm", l);
    check_vector(L.ffn_norm, c.d_model, "ffn_norm", l);
    const bool recurrent = c.layer_recurrent(static_cast<uint32_t>(l));
    if (recurrent) {
      const DeltaNetConfig& dn = c.delta_net;
      check_matrix(L.ssm_qkv, dn.conv_channels(), c.d_model, "attn_qkv", l);
      check_matrix(L.ssm_gate, dn.value_dim(), c.d_model, "attn_gate", l);
      check_matrix(L.ssm_beta, dn.v_heads, c.d_model, "ssm_beta", l);
      check_matrix(L.ssm_alpha, dn.v_heads, c.d_model, "ssm_alpha", l);
      check_matrix(L.ssm_out, c.d_model, dn.value_dim(), "ssm_out", l);
      check_vector(L.ssm_conv_t, size_t{dn.conv_channels()} * dn.conv_kernel, "ssm_conv1d", l);
      check_vector(L.ssm_dt_bias, dn.v_heads, "ssm_dt.bias", l);
      check_vector(L.ssm_a, dn.v_heads, "ssm_a", l);
      check_vector(L.ssm_norm, dn.v_dim, "ssm_norm", l);
    } else {
      const uint32_t li = static_cast<uint32_t>(l), q_dim = c.q_dim_of(li);
      check_matrix(L.wq, c.attn_output_gate ? 2 * q_dim : q_dim, c.d_model, "attn_q", l);
      if (c.layer_has_kv(li)) {
        check_matrix(L.wk, c.kv_dim_of(li), c.d_model, "attn_k", l);
        if (!c.layer_v_from_k(li)) check_matrix(L.wv, c.kv_dim_of(li), c.d_model, "attn_v", l);
      }
      check_matrix(L.wo, c.d_model, q_dim, "attn_output", l);
    }
    if (c.dense_ffn()) {
      const uint32_t d_ff = c.d_ff_of(static_cast<uint32_t>(l));
      check_matrix(L.w_gate, d_ff, c.d_model, "ffn_gate", l);
      check_matrix(L.w_up, d_ff, c.d_model, "ffn_up", l);
      check_matrix(L.w_down, c.d_model, d_ff, "ffn_down", l);
    }
    if (c.n_experts > 0) {
      check_matrix(L.router, c.n_experts, c.d_model, "ffn_gate_inp", l);
      for (const auto* e : {&L.exp_gate, &L.exp_up, &L.exp_down})
        if (e->size() != c.n_experts)
          fail("engine: layer {} has {} experts, config says {}", l, e->size(), c.n_experts);
      for (uint32_t e = 0; e < c.n_experts; ++e) {
        check_matrix(L.exp_gate[e], c.d_ff_expert, c.d_model, "ffn_gate_exps", l);
        check_matrix(L.exp_up[e], c.d_ff_expert, c.d_model, "ffn_up_exps", l);
        check_matrix(L.exp_down[e], c.d_model, c.d_ff_expert, "ffn_down_exps", l);
      }
      if (c.d_ff_shared_expert > 0) {
        check_matrix(L.sh_gate, c.d_ff_shared_expert, c.d_model, "ffn_gate_shexp", l);
        check_matrix(L.sh_up, c.d_ff_shared_expert, c.d_model, "ffn_up_shexp", l);
        check_matrix(L.sh_down, c.d_model, c.d_ff_shared_expert, "ffn_down_shexp", l);
        check_vector(L.sh_gate_inp, c.d_model, "ffn_gate_inp_shexp", l);
      }
    }
    auto check_optional = [&](const std::vector<float>& v, bool present, size_t n,
                              const char* name) { check_vector(v, present ? n : 0, name, l); };
    check_optional(L.bq, c.qkv_bias && !recurrent, c.q_dim(), "attn_q.bias");
    check_optional(L.bk, c.qkv_bias && !recurrent, c.kv_dim(), "attn_k.bias");
    check_optional(L.bv, c.qkv_bias && !recurrent, c.kv_dim(), "attn_v.bias");
    const uint32_t hd = c.head_dim_of(static_cast<uint32_t>(l));
    const bool stores_kv = c.layer_has_kv(static_cast<uint32_t>(l));
    check_optional(L.q_norm, c.qk_norm && !recurrent, hd, "attn_q_norm");
    check_optional(L.k_norm, c.qk_norm && stores_kv, hd, "attn_k_norm");
    check_optional(L.post_attn_norm, c.post_norms, c.d_model, "post_attention_norm");
    check_optional(L.post_ffn_norm, c.post_norms, c.d_model, "post_ffw_norm");
    check_optional(L.ple_post_norm, c.d_per_layer_input > 0, c.d_model, "post_norm");
    const bool beside = c.moe_beside_dense;
    check_optional(L.router_scale, beside, c.d_model, "ffn_gate_inp.scale");
    check_optional(L.expert_scale, beside, c.n_experts, "ffn_down_exps.scale");
    check_optional(L.pre_ffn_norm2, beside, c.d_model, "pre_ffw_norm_2");
    check_optional(L.post_ffn_norm1, beside, c.d_model, "post_ffw_norm_1");
    check_optional(L.post_ffn_norm2, beside, c.d_model, "post_ffw_norm_2");
    check_optional(L.bo, c.attn_out_bias && !recurrent, c.d_model, "attn_output.bias");
    check_optional(L.sinks, c.attn_sinks && !recurrent, c.n_heads, "attn_sinks");
    const bool moe_bias = c.moe_bias && c.n_experts > 0;
    const size_t e = c.n_experts;
    check_optional(L.router_bias, moe_bias, e, "ffn_gate_inp.bias");
    check_optional(L.exp_gate_bias, moe_bias, e * c.d_ff_expert, "ffn_gate_exps.bias");
    check_optional(L.exp_up_bias, moe_bias, e * c.d_ff_expert, "ffn_up_exps.bias");
    check_optional(L.exp_down_bias, moe_bias, e * c.d_model, "ffn_down_exps.bias");
    if (c.d_per_layer_input > 0) {
      check_matrix(L.ple_gate, c.d_per_layer_input, c.d_model, "inp_gate", l);
      check_matrix(L.ple_proj, c.d_model, c.d_per_layer_input, "proj", l);
    }
  }
}

}  // namespace pith
