// Derived rope settings and config validation shared by the GGUF and Hugging Face loaders.
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "backend/model_config.h"
#include "common/error.h"
#include "engine/architectures/architecture.h"
#include "engine/model_loader.h"

namespace pith {

// Llama 3 "rope_type: llama3": rotary pairs whose wavelength exceeds the original context
// (divided by low_freq_factor) are slowed by `factor`, short wavelengths are kept, and the band
// in between is interpolated. Returned as divisors of the base frequency, as GGUF's
// rope_freqs.weight stores them. Computed in double, like the reference converters.
std::vector<float> llama3_rope_freq_factors(uint32_t head_dim, float theta, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            uint32_t original_context) {
  if (head_dim == 0 || head_dim % 2 != 0)
    fail("llama3 rope scaling: head_dim {} must be even", head_dim);
  if (!(factor > 0) || !(low_freq_factor > 0) || !(high_freq_factor > low_freq_factor) ||
      original_context == 0 || !(theta > 0))
    fail(
        "llama3 rope scaling: invalid parameters (factor {}, low_freq_factor {}, high_freq_factor "
        "{}, "
        "original_max_position_embeddings {}, theta {})",
        factor, low_freq_factor, high_freq_factor, original_context, theta);
  const double ctx = original_context;
  const double low_wavelen = ctx / low_freq_factor;
  const double high_wavelen = ctx / high_freq_factor;
  std::vector<float> out(head_dim / 2);
  for (uint32_t i = 0; i < head_dim / 2; ++i) {
    double freq = 1.0 / std::pow(double(theta), double(2 * i) / head_dim);
    double wavelen = 2 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = factor;
    } else {
      double smooth =
          (ctx / wavelen - low_freq_factor) / (double(high_freq_factor) - low_freq_factor);
      f = 1.0 / ((1 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(f);
  }
  return out;
}

float yarn_default_mscale(float factor) {
  return factor > 1 ? 1.0f + 0.1f * std::log(factor) : 1.0f;
}

float longrope_default_attn_factor(double scale, uint32_t original_context) {
  if (scale <= 1 || original_context <= 1) return 1.0f;
  return static_cast<float>(std::sqrt(1 + std::log(scale) / std::log(double(original_context))));
}

void choose_longrope_factors(ModelConfig& c) {
  if (!c.longrope.enabled()) return;
  c.rope_freq_factors = c.context_length > c.longrope.original_context ? c.longrope.long_factors
                                                                       : c.longrope.short_factors;
}

void apply_rope_scaling(ModelConfig& c, const nlohmann::json& s, const std::string& source) {
  if (s.is_null()) return;
  if (!s.is_object()) fail("{}: 'rope_scaling' must be an object", source);
  auto has = [&](const char* k) { return s.contains(k) && !s[k].is_null(); };
  auto num = [&](const char* k) -> float {
    if (!has(k)) fail("{}: rope_scaling is missing '{}'", source, k);
    if (!s[k].is_number()) fail("{}: rope_scaling '{}' must be a number", source, k);
    return s[k].get<float>();
  };
  auto num_or = [&](const char* k, float fallback) { return has(k) ? num(k) : fallback; };
  const std::string type =
      has("rope_type") && s["rope_type"].is_string()
          ? s["rope_type"].get<std::string>()
          : (has("type") && s["type"].is_string() ? s["type"].get<std::string>() : "default");
  if (type == "llama3") {
    c.rope_freq_factors = llama3_rope_freq_factors(
        c.rotary_dim(), c.rope_theta, num("factor"), num("low_freq_factor"),
        num("high_freq_factor"), static_cast<uint32_t>(num("original_max_position_embeddings")));
  } else if (type == "linear") {
    c.rope_freq_factors.assign(c.rotary_dim() / 2, num("factor"));
  } else if (type == "yarn") {
    // transformers' _compute_yarn_parameters: attention_factor, else the ratio of the two
    // mscales where both are given (DeepSeek), else 1 + 0.1 ln factor.
    YarnRope y;
    y.factor = num("factor");
    y.original_context = static_cast<uint32_t>(
        num_or("original_max_position_embeddings", static_cast<float>(c.context_length)));
    y.beta_fast = num_or("beta_fast", 32), y.beta_slow = num_or("beta_slow", 1);
    y.truncate = !has("truncate") || s["truncate"].get<bool>();
    if (has("attention_factor")) {
      y.mscale = num("attention_factor");
    } else if (has("mscale") && has("mscale_all_dim")) {
      auto m = [&](float mscale) {
        return y.factor > 1 ? 0.1f * mscale * std::log(y.factor) + 1.0f : 1.0f;
      };
      y.mscale = m(num("mscale")) / m(num("mscale_all_dim"));
    } else {
      y.mscale = yarn_default_mscale(y.factor);
    }
    if (!(y.factor > 0) || y.original_context == 0)
      fail("{}: rope_scaling (yarn) needs a positive factor and original context", source);
    c.yarn = y;
  } else if (type == "longrope" || type == "su") {
    auto factors = [&](const char* k) {
      if (!has(k) || !s[k].is_array()) fail("{}: rope_scaling ({}) needs '{}'", source, type, k);
      std::vector<float> v;
      for (const auto& x : s[k]) {
        if (!x.is_number()) fail("{}: rope_scaling '{}' must hold numbers", source, k);
        v.push_back(x.get<float>());
      }
      return v;
    };
    c.longrope.long_factors = factors("long_factor");
    c.longrope.short_factors = factors("short_factor");
    const float orig = num("original_max_position_embeddings");
    if (!(orig >= 1)) fail("{}: rope_scaling original_max_position_embeddings {}", source, orig);
    c.longrope.original_context = static_cast<uint32_t>(orig);
    c.rope_attn_factor = has("attention_factor")
                             ? num("attention_factor")
                             : longrope_default_attn_factor(double(c.context_length) / orig,
                                                            c.longrope.original_context);
    choose_longrope_factors(c);
  } else if (type != "default" && type != "mrope") {
    fail("{}: rope_scaling type '{}' is not supported (llama3, linear, yarn, longrope)", source,
         type);
  }
}

void validate_config(const ModelConfig& c, const std::string& source) {
  constexpr uint32_t kMaxDim = 1u << 20;
  auto check_size = [&](const char* what, uint32_t v, uint32_t max) {
    if (v == 0 || v > max) fail("{}: {} = {} is out of range (1..{})", source, what, v, max);
  };
  if (!find_architecture(c.architecture))
    fail("{}: unsupported architecture '{}' (pith supports {})", source, c.architecture,
         supported_architecture_names());
  check_size("n_layers", c.n_layers, 4096);
  check_size("d_model", c.d_model, kMaxDim);
  check_size("n_heads", c.n_heads, 4096);
  check_size("n_kv_heads", c.n_kv_heads, 4096);
  check_size("head_dim", c.head_dim, 4096);
  check_size("d_ff", c.d_ff, kMaxDim * 4);
  check_size("vocab_size", c.vocab_size, 1u << 24);
  check_size("context_length", c.context_length, 1u << 24);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: n_heads {} is not a multiple of n_kv_heads {}", source, c.n_heads, c.n_kv_heads);
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for RoPE", source, c.head_dim);
  if (!(c.rms_eps > 0) || !std::isfinite(c.rms_eps))
    fail("{}: invalid rms epsilon {}", source, c.rms_eps);
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    fail("{}: invalid rope theta {}", source, c.rope_theta);
  if (c.sliding_window > 0 && c.sliding_layers.size() != c.n_layers)
    fail("{}: sliding-window flags for {} layers, model has {}", source, c.sliding_layers.size(),
         c.n_layers);
  for (float v : {c.embed_scale, c.attn_scale, c.attn_softcap, c.final_softcap, c.rope_theta_local})
    if (!(v >= 0) || !std::isfinite(v))
      fail("{}: invalid model option value {} (scales, soft-caps and RoPE bases are >= 0)", source,
           v);
  if (!(c.embed_scale > 0)) fail("{}: embedding scale must be positive", source);
  if (!c.recurrent_layers.empty()) {
    const DeltaNetConfig& dn = c.delta_net;
    if (c.recurrent_layers.size() != c.n_layers)
      fail("{}: recurrent-layer flags for {} layers, model has {}", source,
           c.recurrent_layers.size(), c.n_layers);
    if (c.n_kv_layers() == 0) fail("{}: a hybrid model needs at least one attention layer", source);
    check_size("linear attention key heads", dn.k_heads, 4096);
    check_size("linear attention value heads", dn.v_heads, 4096);
    check_size("linear attention key head size", dn.k_dim, 4096);
    check_size("linear attention value head size", dn.v_dim, 4096);
    check_size("linear attention conv kernel", dn.conv_kernel, 64);
    if (dn.v_heads % dn.k_heads != 0)
      fail("{}: {} linear attention value heads are not a multiple of {} key heads", source,
           dn.v_heads, dn.k_heads);
    if (dn.conv_kernel < 2) fail("{}: conv kernel {} is too short", source, dn.conv_kernel);
  }
  if (c.global_head_dim % 2 != 0 || c.global_head_dim > 4096)
    fail("{}: global head size {} must be even and at most 4096", source, c.global_head_dim);
  if (c.global_kv_heads > 0 && c.n_heads % c.global_kv_heads != 0)
    fail("{}: n_heads {} is not a multiple of the global layers' {} KV heads", source, c.n_heads,
         c.global_kv_heads);
  if (c.rope_dim_local > c.head_dim || c.rope_dim_local % 2 != 0)
    fail("{}: sliding layers' rotary dimensions {} must be even and at most head_dim {}", source,
         c.rope_dim_local, c.head_dim);
  if (c.n_kv_shared_layers >= c.n_layers)
    fail("{}: {} KV-sharing layers of {}", source, c.n_kv_shared_layers, c.n_layers);
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    fail("{}: rotary dimensions {} must be even and at most head_dim {}", source, c.rope_dim,
         c.head_dim);
  if (c.longrope.enabled() && (c.longrope.long_factors.size() != c.rotary_dim() / 2 ||
                               c.longrope.short_factors.size() != c.rotary_dim() / 2))
    fail("{}: LongRoPE factors have {} (long) and {} (short) entries, expected rotary dims/2 = {}",
         source, c.longrope.long_factors.size(), c.longrope.short_factors.size(),
         c.rotary_dim() / 2);
  if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor))
    fail("{}: rope attention factor {} is not positive", source, c.rope_attn_factor);
  if (!c.rope_freq_factors.empty()) {
    if (c.rope_freq_factors.size() != c.rotary_dim() / 2)
      fail("{}: rope frequency factors have {} entries, expected rotary dims/2 = {}", source,
           c.rope_freq_factors.size(), c.rotary_dim() / 2);
    for (float f : c.rope_freq_factors)
      if (!(f > 0) || !std::isfinite(f))
        fail("{}: rope frequency factor {} is not positive", source, f);
  }
}

}  // namespace pith
