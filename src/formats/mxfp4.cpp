#include "formats/mxfp4.h"

#include <cmath>

namespace pith {

namespace {

// The code of the doubled level nearest to v (ties: the smaller magnitude); v's sign picks the
// half of the table. The index is the number of midpoints between neighbouring levels that |v|
// lies above (they are exact in f32).
uint8_t nearest_code(float v) {
  const float a = std::fabs(v);
  const int best =
      (a > 0.5f) + (a > 1.5f) + (a > 2.5f) + (a > 3.5f) + (a > 5.0f) + (a > 7.0f) + (a > 10.0f);
  return static_cast<uint8_t>(best == 0 ? 0 : (v < 0 ? best + 8 : best));
}

// Squared error of 32 values coded at exponent e; fills q.
double code_block(const float* x, uint8_t e, uint8_t q[32]) {
  const float d = mxfp4_half_scale(e), id = 1.0f / d;
  double err = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = nearest_code(x[j] * id);
    const double r = double(x[j]) - double(kMxfp4Levels[q[j]]) * d;
    err += r * r;
  }
  return err;
}

}  // namespace

void dequantize_mxfp4(const BlockMXFP4* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const BlockMXFP4& blk = blocks[b];
    const float d = mxfp4_half_scale(blk.e);
    for (int j = 0; j < 16; ++j) {
      out[32 * b + j] = kMxfp4Levels[blk.qs[j] & 15] * d;
      out[32 * b + j + 16] = kMxfp4Levels[blk.qs[j] >> 4] * d;
    }
  }
}

// The OCP rule takes the exponent that puts the largest |x| in the top binade of the format
// (which clips the largest values above 1.5 times its power of two); the exponent above it
// is tried too and the smaller squared error wins.
void quantize_mxfp4(const float* x, BlockMXFP4* blocks, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    BlockMXFP4& blk = blocks[b];
    uint8_t q[32] = {};
    uint8_t e = 0;
    if (amax > 0 && std::isfinite(amax)) {
      const int ocp = static_cast<int>(std::floor(std::log2(amax))) - 2 + 127;
      const int lo = ocp < 0 ? 0 : (ocp > 254 ? 254 : ocp);
      uint8_t q_hi[32];
      const double err_lo = code_block(xb, static_cast<uint8_t>(lo), q);
      const double err_hi = code_block(xb, static_cast<uint8_t>(lo + 1), q_hi);
      e = static_cast<uint8_t>(lo);
      if (err_hi < err_lo) {
        e = static_cast<uint8_t>(lo + 1);
        for (int j = 0; j < 32; ++j) q[j] = q_hi[j];
      }
    }
    blk.e = e;
    for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}

}  // namespace pith
