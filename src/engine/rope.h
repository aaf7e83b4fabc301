// Rotary position embeddings (RoPE) as llama.cpp applies them: each head's vector is rotated
// in pairs, adjacent (2i, 2i+1) for `llama` or halves (i, i + head_dim/2), by the angle
//   pos * theta^(-2i/head_dim) / freq_factors[i]
// (GGUF stores the Q/K rows already permuted for this pairing; HF weights are permuted at load
// time, see model_weights.h).
//
// The angles are computed exactly as ggml does, in f32: theta_0 = pos, theta_{i+1} = theta_i *
// theta_scale with theta_scale = theta^(-2/head_dim), angle_i = theta_i / freq_factors[i],
// then cosf/sinf. With YaRN (ModelConfig::yarn) the angle is then mixed as ggml's rope_yarn
// does, theta_interp * (1 - m_i) + theta_extrap * m_i with theta_interp = angle_i / factor, and
// cos/sin are multiplied by its mscale. A "more exact" double computation differs by ~1e-6 rad at
// position 300, which is harmless in f32 but flips activation roundings of quantised matmuls: on
// the q8_0 oracle `long` prompt it measured worst 1.0e-2 and top-1 296/300, against 6.1e-3 and
// 300/300 with ggml's recurrence. Computed once per input per forward and shared by all layers.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/model_config.h"

namespace pith {

class RopeTable {
 public:
  // Over the rotary dimensions (rotary_dim(): head_dim, or rope_dim for partial rotary).
  // Throws pith::Error when they are odd or freq factors do not have half as many entries.
  explicit RopeTable(const ModelConfig& config);
  // attn_factor scales cos and sin outside YaRN (ModelConfig::rope_attn_factor).
  RopeTable(uint32_t head_dim, float theta, const std::vector<float>& freq_factors,
            const YarnRope& yarn = {}, float attn_factor = 1.0f);

  uint32_t n_pairs() const { return static_cast<uint32_t>(freq_factors_.size()); }

  // cos/sin of every pair's angle at `pos`: writes n_pairs() values to each.
  void angles(uint32_t pos, float* cos_out, float* sin_out) const;

 private:
  float theta_scale_ = 1;            // theta^(-2/head_dim), f32 as ggml computes it
  std::vector<float> freq_factors_;  // [head_dim/2], 1 when the model has none
  // YaRN (ModelConfig::yarn): per pair the share m_i of the unscaled angle, 1 / factor, and
  // the scale of cos and sin; empty yarn_mix_ when off.
  std::vector<float> yarn_mix_;
  float freq_scale_ = 1, mscale_ = 1;
};

// The table of a model's sliding-window layers: their own base (rope_theta_local, gemma3/4) over
// the first sliding layer's rotary size, without frequency factors; the global table's
// parameters when the model has no second base.
RopeTable sliding_rope_table(const ModelConfig& config);

// Rotates n_heads vectors (heads concatenated, head_stride floats apart; 0 means 2 * n_pairs)
// in place with the given cos/sin [n_pairs]. With head_stride > 2 * n_pairs only the first
// 2 * n_pairs dimensions of each head turn (partial rotary, ModelConfig::rope_dim).
void apply_rope(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                const float* sin_v, uint32_t head_stride = 0);

// The same rotation with pair i = (i, i + n_pairs) of each head (RopeStyle::SplitHalf, the
// layout of qwen2/3, phi3 and gemma checkpoints in both formats).
void apply_rope_split_half(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                           const float* sin_v, uint32_t head_stride = 0);

}  // namespace pith
