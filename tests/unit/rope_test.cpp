// RoPE: angles follow theta and per-pair frequency factors (to f32 precision of ggml's
// recurrence), the rotation acts on adjacent pairs and preserves each pair's norm, and bad
// configurations are rejected with pith::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "engine/rope.h"

namespace pith {
namespace {

ModelConfig config(uint32_t head_dim, float theta, std::vector<float> ff = {}) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = theta;
  c.rope_freq_factors = std::move(ff);
  return c;
}

TEST(Rope, AnglesFollowThetaAndFreqFactors) {
  std::vector<float> ff{1, 1, 1, 1, 3.2922626f, 32, 32, 32};  // the oracle models' llama3 factors
  RopeTable t(config(16, 500000.0f, ff));
  ASSERT_EQ(t.n_pairs(), 8u);
  for (uint32_t pos : {0u, 1u, 7u, 299u, 4095u}) {
    float c[8], s[8];
    t.angles(pos, c, s);
    for (uint32_t i = 0; i < 8; ++i) {
      double a = pos * std::pow(500000.0, -2.0 * i / 16) / ff[i];
      // f32 recurrence: relative angle error ~ i ulps, i.e. |Δ| ≲ 1e-6 * |a| + 1e-7.
      EXPECT_NEAR(c[i], std::cos(a), 2e-6 * std::abs(a) + 1e-6) << pos << " " << i;
      EXPECT_NEAR(s[i], std::sin(a), 2e-6 * std::abs(a) + 1e-6) << pos << " " << i;
    }
  }
}

TEST(Rope, RotatesAdjacentPairsOfEveryHead) {
  RopeTable t(config(4, 10000.0f));
  float c[2], s[2];
  t.angles(3, c, s);
  float x[8] = {1, 0, 0, 1, 2, 0, 3, 4};  // 2 heads of 4
  apply_rope(x, 2, 2, c, s);
  const double a0 = 3.0, a1 = 3.0 / 100.0;  // theta^(-2i/4) = 1, 1/100
  EXPECT_NEAR(x[0], std::cos(a0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(a0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(a1), 1e-6);
  EXPECT_NEAR(x[3], std::cos(a1), 1e-6);
  EXPECT_NEAR(x[4], 2 * std::cos(a0), 1e-6);
  EXPECT_NEAR(std::hypot(x[6], x[7]), 5.0, 1e-5);  // norm of (3, 4) kept
  // Position 0 is the identity.
  t.angles(0, c, s);
  float y[4] = {0.5f, -1, 2, 3};
  apply_rope(y, 1, 2, c, s);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[3], 3.0f);
}

// YaRN against transformers' _compute_yarn_parameters written out in double: inv_freq_i =
// base^(-2i/d) * ((1 - e_i) / factor + e_i) with e_i = 1 - clamp((i - low) / (high - low)),
// low/high the pairs turning beta_fast/beta_slow times over the original context (floored /
// ceiled), cos and sin times the attention factor; on top of per-pair frequency factors.
TEST(Rope, YarnMixesInterpolatedAndOriginalAnglesAndScales) {
  const uint32_t d = 64;
  const double base = 10000.0, factor = 4;
  const uint32_t orig = 4096;
  for (const bool with_ff : {false, true}) {
    ModelConfig c = config(d, float(base));
    if (with_ff) c.rope_freq_factors.assign(d / 2, 1.0f), c.rope_freq_factors[3] = 2.5f;
    c.yarn = {float(factor), orig, 32, 1, 1.25f, true};
    RopeTable t(c);
    auto pair_of = [&](double rotations) {
      return d * std::log(orig / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(0.0, std::floor(pair_of(32))),
                 high = std::min(d - 1.0, std::ceil(pair_of(1)));
    ASSERT_GT(high - low, 4);  // the ramp spans several pairs, some pairs on either side
    ASSERT_GT(low, 0);
    ASSERT_LT(high, d / 2 - 1);
    for (uint32_t pos : {1u, 17u, 999u, 16000u}) {
      std::vector<float> cs(d / 2), sn(d / 2);
      t.angles(pos, cs.data(), sn.data());
      for (uint32_t i = 0; i < d / 2; ++i) {
        const double e = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double ff = with_ff ? c.rope_freq_factors[i] : 1.0;
        const double a = pos * std::pow(base, -2.0 * i / d) / ff * ((1 - e) / factor + e);
        EXPECT_NEAR(cs[i], 1.25 * std::cos(a), 3e-6 * std::abs(a) + 2e-6) << pos << " " << i;
        EXPECT_NEAR(sn[i], 1.25 * std::sin(a), 3e-6 * std::abs(a) + 2e-6) << pos << " " << i;
      }
    }
  }
  ModelConfig bad = config(d, 10000.0f);
  bad.yarn = {4, 0, 32, 1, 1, true};  // no original context
  EXPECT_THROW(RopeTable{bad}, Error);
}

// LongRoPE's attention factor (ModelConfig::rope_attn_factor) scales cos and sin of every pair,
// over the per-pair factors, outside YaRN.
TEST(Rope, AttentionFactorScalesCosAndSin) {
  const uint32_t d = 12;
  ModelConfig c = config(d, 10000.0f);
  c.rope_freq_factors = {1.0f, 1.5f, 2.3f, 4.1f, 7.9f, 13.0f};
  c.rope_attn_factor = std::sqrt(3.0f);
  RopeTable scaled(c);
  c.rope_attn_factor = 1.0f;
  RopeTable plain(c);
  for (uint32_t pos : {0u, 5u, 4000u}) {
    std::vector<float> cs(d / 2), sn(d / 2), c1(d / 2), s1(d / 2);
    scaled.angles(pos, cs.data(), sn.data());
    plain.angles(pos, c1.data(), s1.data());
    for (uint32_t i = 0; i < d / 2; ++i) {
      const double a = pos * std::pow(10000.0, -2.0 * i / d) / c.rope_freq_factors[i];
      EXPECT_NEAR(c1[i], std::cos(a), 3e-6 * a + 2e-6);
      EXPECT_EQ(cs[i], c1[i] * std::sqrt(3.0f)) << pos << " " << i;
      EXPECT_EQ(sn[i], s1[i] * std::sqrt(3.0f)) << pos << " " << i;
    }
  }
  c.rope_attn_factor = 0.0f;
  EXPECT_THROW(RopeTable{c}, Error);
}

TEST(Rope, RejectsBadConfigs) {
  EXPECT_THROW(RopeTable(config(15, 10000.0f)), Error);
  EXPECT_THROW(RopeTable(config(0, 10000.0f)), Error);
  EXPECT_THROW(RopeTable(config(16, 0.0f)), Error);
  EXPECT_THROW(RopeTable(config(16, 10000.0f, {1, 2, 3})), Error);
  EXPECT_THROW(RopeTable(config(4, 10000.0f, {1, 0})), Error);
}

}  // namespace
}  // namespace pith
