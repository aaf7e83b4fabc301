// RoPE: frequency table and the in-place pair rotation. See rope.h.
#include "engine/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.h"

namespace pith {

RopeTable::RopeTable(const ModelConfig& config)
    : RopeTable(config.rotary_dim(), config.rope_theta, config.rope_freq_factors, config.yarn,
                config.rope_attn_factor) {}

namespace {

// The pair index (fractional) that turns `rotations` times over `context` positions: ggml's
// ggml_rope_yarn_corr_dim, HF's find_correction_dim.
double yarn_pair(uint32_t hd, float base, uint32_t context, float rotations) {
  return hd * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

RopeTable::RopeTable(uint32_t hd, float rope_theta, const std::vector<float>& ff,
                     const YarnRope& yarn, float attn_factor) {
  if (hd == 0 || hd % 2 != 0) fail("RoPE: head_dim {} must be even and non-zero", hd);
  const uint32_t n = hd / 2;
  if (!ff.empty() && ff.size() != n)
    fail("RoPE: {} rope_freq_factors for head_dim {} (expected {})", ff.size(), hd, n);
  if (!(rope_theta > 0)) fail("RoPE: theta {} must be positive", rope_theta);
  theta_scale_ = std::pow(rope_theta, -2.0f / static_cast<float>(hd));
  freq_factors_.assign(n, 1.0f);
  for (uint32_t i = 0; i < ff.size(); ++i) {
    if (!(ff[i] > 0)) fail("RoPE: rope_freq_factors[{}] = {} must be positive", i, ff[i]);
    freq_factors_[i] = ff[i];
  }
  if (!(attn_factor > 0)) fail("RoPE: attention factor {} must be positive", attn_factor);
  mscale_ = attn_factor;
  if (yarn.factor == 0) return;
  if (!(yarn.factor > 0) || yarn.original_context == 0 || !(yarn.beta_fast > 0) ||
      !(yarn.beta_slow > 0) || !(yarn.mscale > 0))
    fail(
        "RoPE: invalid YaRN scaling (factor {}, original context {}, beta_fast {}, beta_slow {}, "
        "mscale {})",
        yarn.factor, yarn.original_context, yarn.beta_fast, yarn.beta_slow, yarn.mscale);
  // The ramp's ends in pairs (ggml_rope_yarn_corr_dims; HF's find_correction_range), then
  // m_i = 1 - clamp((i - low) / (high - low)) (ggml's rope_yarn_ramp, HF's linear_ramp_factor).
  double low = yarn_pair(hd, rope_theta, yarn.original_context, yarn.beta_fast);
  double high = yarn_pair(hd, rope_theta, yarn.original_context, yarn.beta_slow);
  if (yarn.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, double(hd) - 1);
  const float lo = static_cast<float>(low), span = std::max(0.001f, static_cast<float>(high - low));
  yarn_mix_.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    yarn_mix_[i] = 1 - std::min(1.0f, std::max(0.0f, (static_cast<float>(i) - lo) / span));
  freq_scale_ = 1 / yarn.factor;
  mscale_ = yarn.mscale;
}

RopeTable sliding_rope_table(const ModelConfig& c) {
  if (c.rope_theta_local <= 0) return RopeTable(c);
  uint32_t first = 0;  // the first sliding layer (layer 0 where none slides)
  for (uint32_t l = c.n_layers; l-- > 0;)
    if (c.layer_slides(l)) first = l;
  return RopeTable(c.rotary_dim_of(first), c.rope_theta_local, {});
}

void RopeTable::angles(uint32_t pos, float* cos_out, float* sin_out) const {
  // ggml's recurrence, in f32: theta_0 = pos, theta_{i+1} = theta_i * theta_scale.
  float theta = static_cast<float>(pos);
  for (size_t i = 0; i < freq_factors_.size(); ++i) {
    float a = theta / freq_factors_[i];
    if (!yarn_mix_.empty()) {
      const float interp = freq_scale_ * a;
      a = interp * (1 - yarn_mix_[i]) + a * yarn_mix_[i];
    }
    cos_out[i] = std::cos(a) * mscale_;
    sin_out[i] = std::sin(a) * mscale_;
    theta *= theta_scale_;
  }
}

void apply_rope(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                const float* sin_v, uint32_t head_stride) {
  const size_t stride = head_stride ? head_stride : 2 * n_pairs;
  for (uint32_t h = 0; h < n_heads; ++h) {
    float* v = x + h * stride;
    for (uint32_t i = 0; i < n_pairs; ++i) {
      float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cos_v[i] - x1 * sin_v[i];
      v[2 * i + 1] = x0 * sin_v[i] + x1 * cos_v[i];
    }
  }
}

void apply_rope_split_half(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                           const float* sin_v, uint32_t head_stride) {
  const size_t stride = head_stride ? head_stride : 2 * n_pairs;
  for (uint32_t h = 0; h < n_heads; ++h) {
    float* lo = x + h * stride;
    float* hi = lo + n_pairs;
    for (uint32_t i = 0; i < n_pairs; ++i) {
      float x0 = lo[i], x1 = hi[i];
      lo[i] = x0 * cos_v[i] - x1 * sin_v[i];
      hi[i] = x0 * sin_v[i] + x1 * cos_v[i];
    }
  }
}

}  // namespace pith
