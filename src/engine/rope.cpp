// RoPE: frequency table and the in-place pair rotation. See rope.h.
#include "engine/rope.h"

#include <cmath>

#include "common/error.h"

namespace pith {

RopeTable::RopeTable(const ModelConfig& config) {
  const uint32_t hd = config.head_dim;
  if (hd == 0 || hd % 2 != 0) fail("RoPE: head_dim {} must be even and non-zero", hd);
  const uint32_t n = hd / 2;
  const auto& ff = config.rope_freq_factors;
  if (!ff.empty() && ff.size() != n)
    fail("RoPE: {} rope_freq_factors for head_dim {} (expected {})", ff.size(), hd, n);
  if (!(config.rope_theta > 0)) fail("RoPE: theta {} must be positive", config.rope_theta);
  inv_freq_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    double f = std::pow(double(config.rope_theta), -2.0 * i / hd);
    if (!ff.empty()) {
      if (!(ff[i] > 0)) fail("RoPE: rope_freq_factors[{}] = {} must be positive", i, ff[i]);
      f /= ff[i];
    }
    inv_freq_[i] = f;
  }
}

void RopeTable::angles(uint32_t pos, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    double a = double(pos) * inv_freq_[i];
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

void apply_rope(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                const float* sin_v) {
  for (uint32_t h = 0; h < n_heads; ++h) {
    float* v = x + size_t{h} * 2 * n_pairs;
    for (uint32_t i = 0; i < n_pairs; ++i) {
      float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cos_v[i] - x1 * sin_v[i];
      v[2 * i + 1] = x0 * sin_v[i] + x1 * cos_v[i];
    }
  }
}

}  // namespace pith
