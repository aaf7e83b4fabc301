// Rotary position embeddings (RoPE) as llama.cpp's `llama` arch applies them: each head's
// vector is rotated in adjacent pairs (2i, 2i+1) by the angle
//   pos * theta^(-2i/head_dim) / freq_factors[i]
// (GGUF stores the Q/K rows already permuted for this pairing; HF weights are permuted at load
// time, see model_weights.h). Angles are computed in double and rounded once, so long contexts
// do not accumulate error.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model_config.h"

namespace pith {

class RopeTable {
 public:
  // Throws pith::Error when head_dim is odd or freq factors do not have head_dim/2 entries.
  explicit RopeTable(const ModelConfig& config);

  uint32_t n_pairs() const { return static_cast<uint32_t>(inv_freq_.size()); }

  // cos/sin of every pair's angle at `pos`: writes n_pairs() values to each.
  void angles(uint32_t pos, float* cos_out, float* sin_out) const;

 private:
  std::vector<double> inv_freq_;  // [head_dim/2]: theta^(-2i/head_dim) / freq_factor[i]
};

// Rotates n_heads vectors of head_dim = 2 * n_pairs floats (heads concatenated) in place with
// the given cos/sin [n_pairs].
void apply_rope(float* x, uint32_t n_heads, uint32_t n_pairs, const float* cos_v,
                const float* sin_v);

}  // namespace pith
