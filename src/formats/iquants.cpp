#include "formats/iquants.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/fp16.h"
#include "formats/legacy_quants.h"

namespace pith {

namespace {

// The index of the level nearest to v (ties to the lower level), by table: the 15 midpoints
// between neighbouring levels are multiples of 1/2, so with k = ceil(2v) - 1 (2v in (k, k + 1])
// v lies above midpoint m exactly when k >= 2m, and the index is the count of such midpoints.
constexpr int kTwiceLowestMid = -127 - 104, kTwiceHighestMid = 89 + 113;
constexpr auto kLevelByTwiceValue = [] {
  std::array<uint8_t, kTwiceHighestMid - kTwiceLowestMid + 1> table{};
  for (int k = kTwiceLowestMid; k <= kTwiceHighestMid; ++k) {
    int above = 0;
    for (int i = 0; i < 15; ++i) above += k >= kIq4nlLevels[i] + kIq4nlLevels[i + 1];
    table[k - kTwiceLowestMid] = static_cast<uint8_t>(above);
  }
  return table;
}();

int nearest_level(float v) {
  const float k = std::ceil(2.0f * v) - 1.0f;
  if (!(k >= kTwiceLowestMid)) return 0;  // NaN too
  if (k >= kTwiceHighestMid) return 15;
  return kLevelByTwiceValue[static_cast<int>(k) - kTwiceLowestMid];
}

// Assigns the 32 values of x to their nearest levels at scale d (index 8, level 1, where d is 0)
// and returns the least-squares scale of that assignment, Σ x v / Σ v²; *err gets the squared
// error at that scale.
float assign_and_refit(const float* x, float d, uint8_t q[32], double* err) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double xv = 0, vv = 0, xx = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<uint8_t>(d != 0.0f ? nearest_level(x[j] * id) : 8);
    const double v = kIq4nlLevels[q[j]];
    xv += double(x[j]) * v, vv += v * v, xx += double(x[j]) * x[j];
  }
  *err = xx - (vv > 0 ? xv * xv / vv : 0.0);
  return vv > 0 ? static_cast<float>(xv / vv) : 0.0f;
}

// The best scale found for 32 values: the element of largest magnitude is tried at a few levels
// near either end of the (asymmetric) table, each assignment refitted by least squares.
float best_block_scale(const float* x) {
  float amax = 0, xm = 0;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), xm = x[j];
  if (amax == 0.0f) return 0.0f;
  uint8_t q[32];
  float best = 0.0f;
  double best_err = INFINITY;
  for (const float end : {-127.0f, 113.0f})
    for (int t = 0; t < 5; ++t) {
      double err;
      const float d = assign_and_refit(x, xm / (end * (1.0f - 0.04f * t)), q, &err);
      if (err < best_err) best_err = err, best = d;
    }
  return best;
}

// The indices of 32 values at scale d, packed as nibbles (dtype.h).
void pack_indices(const float* x, float d, uint8_t qs[16]) {
  uint8_t q[32];
  double unused;
  assign_and_refit(x, d, q, &unused);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

}  // namespace

void dequantize_iq4_nl(const BlockIQ4_NL* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    for (size_t j = 0; j < 32; ++j)
      out[32 * b + j] = d * kIq4nlLevels[nibble_quant(blocks[b].qs, j)];
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    for (int s = 0; s < 8; ++s) {
      const float dl = d * static_cast<float>(iq4xs_subblock_scale(blocks[b], s));
      for (size_t j = 0; j < 32; ++j)
        out[kQK * b + 32 * s + j] = dl * kIq4nlLevels[nibble_quant(blocks[b].qs + 16 * s, j)];
    }
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* blocks, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, x += 32) {
    blocks[b].d = f32_to_f16(best_block_scale(x));
    pack_indices(x, f16_to_f32(blocks[b].d), blocks[b].qs);
  }
}

// Each sub-block's best scale, then one super-block scale d that maps the largest of them to
// -32 (the multipliers' widest end); every sub-block is re-assigned at its stored scale.
void quantize_iq4_xs(const float* x, BlockIQ4_XS* blocks, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockIQ4_XS& blk = blocks[b];
    float sub[8], sm = 0;
    for (int s = 0; s < 8; ++s) {
      sub[s] = best_block_scale(x + 32 * s);
      if (std::fabs(sub[s]) > std::fabs(sm)) sm = sub[s];
    }
    blk.d = f32_to_f16(sm / -32.0f);
    const float d = f16_to_f32(blk.d);
    blk.scales_h = 0;
    blk.scales_l[0] = blk.scales_l[1] = blk.scales_l[2] = blk.scales_l[3] = 0;
    for (int s = 0; s < 8; ++s) {
      const int l = d != 0.0f ? std::clamp(static_cast<int>(std::lround(sub[s] / d)), -32, 31) : 0;
      const int ls = l + 32;
      blk.scales_l[s / 2] = static_cast<uint8_t>(blk.scales_l[s / 2] | (ls & 15) << (4 * (s % 2)));
      blk.scales_h = static_cast<uint16_t>(blk.scales_h | (ls >> 4) << (2 * s));
      pack_indices(x + 32 * s, d * static_cast<float>(l), blk.qs + 16 * s);
    }
  }
}

}  // namespace pith
