// K-quant codec (see kquants.h).
//
// Quantisation, per super-block of 256 values:
//   1. each sub-block gets its own real-valued scale (and, for Q2_K/Q4_K/Q5_K, min) from a small
//      search: a few candidate steps around (max - min) / nmax (or max|x| / 32 for Q6_K, / 4 for
//      Q3_K), each
//      followed by the least-squares scale/min for the levels it assigns; the fit with the
//      smallest squared error wins;
//   2. those scales (mins) are quantised against one f16 super-block scale (4 bits unsigned
//      for Q2_K, 6 bits unsigned for Q4_K/Q5_K, 6 bits signed for Q3_K, 8 bits signed for Q6_K);
//   3. every value is rounded to the nearest level of its quantised sub-block scale and min.
#include "formats/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "common/error.h"
#include "common/fp16.h"

namespace pith {

namespace {

// Round to nearest, ties to even (nearbyint in the default rounding mode) without the libm
// call that baseline x86-64 makes of nearbyint: the quantisers round ~30 times per value.
inline int round_int(float v) {
#if defined(__SSE2__)
  return _mm_cvt_ss2si(_mm_set_ss(v));
#else
  return static_cast<int>(std::nearbyint(v));
#endif
}

// x ≈ scale * q - min with q in [0, nmax], scale ≥ 0, min ≥ 0 (the affine sub-blocks).
struct AffineFit {
  float scale = 0, min = 0;
};

AffineFit fit_affine(const float* x, int n, int nmax) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  if (!(hi > lo)) return {0.0f, -lo};  // constant block (or NaN): q = 0 gives -min = lo
  AffineFit best{(hi - lo) / nmax, -lo};
  double best_err = INFINITY, sx = 0, sxx = 0;
  for (int i = 0; i < n; ++i) sx += x[i], sxx += double(x[i]) * x[i];
  for (int k = -6; k <= 6; ++k) {
    const float step = (hi - lo) / (nmax + 0.1f * k), inv = 1.0f / step;
    int sq = 0, sqq = 0;
    double sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(round_int((x[i] - lo) * inv), 0, nmax);
      sq += q, sqq += q * q, sqx += double(q) * x[i];
    }
    // Least squares for x = a q + b, then b clamped to ≤ 0 (min ≥ 0).
    double a = step, b = lo;
    const double det = double(n) * sqq - double(sq) * sq;
    if (det > 0) {
      a = (n * sqx - sq * sx) / det;
      b = (sx - a * sq) / n;
    }
    if (b > 0) {
      b = 0;
      a = sqq > 0 ? sqx / sqq : 0;
    }
    if (a < 0) continue;
    // Σ (a q + b - x)² from the sums.
    const double err = a * a * sqq + 2 * a * b * sq + n * b * b - 2 * a * sqx - 2 * b * sx + sxx;
    if (err < best_err) best_err = err, best = {float(a), float(-b)};
  }
  return best;
}

// x ≈ scale * q with q in [lo, -lo - 1] (Q6_K sub-blocks: [-32, 31], Q3_K: [-4, 3]); the
// scale's sign maps the value of largest magnitude to the negative end, which has one more
// level.
float fit_symmetric(const float* x, int n, int lo) {
  float xm = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
  if (xm == 0.0f || !std::isfinite(xm)) return 0.0f;
  float best = xm / static_cast<float>(lo);
  double best_err = INFINITY, sxx = 0;
  for (int i = 0; i < n; ++i) sxx += double(x[i]) * x[i];
  for (int k = 0; k <= 12; ++k) {
    const float inv = static_cast<float>(lo) * (1.0f - k / 64.0f) / xm;
    int sqq = 0;
    double sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(round_int(x[i] * inv), lo, -lo - 1);
      sqq += q * q, sqx += double(q) * x[i];
    }
    if (sqq == 0) continue;
    const double a = sqx / sqq;
    const double err = sxx - a * sqx;  // Σ (a q - x)² at the least-squares a
    if (err < best_err) best_err = err, best = float(a);
  }
  return best;
}

// Step 1 for the symmetric types (Q3_K, Q6_K): the 16 sub-block scales, and the one of largest
// magnitude (which the super-block scale maps to the negative end of the scales' range).
float fit_symmetric_subblocks(const float* x, int lo, float scales[16]) {
  float max_scale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric(x + 16 * j, 16, lo);
    if (std::fabs(scales[j]) > std::fabs(max_scale)) max_scale = scales[j];
  }
  return max_scale;
}

// Steps 1-3 for Q4_K / Q5_K: fills d, dmin, the packed scales and the levels L[256].
void quantize_affine_superblock(const float* x, int nmax, uint16_t* d16, uint16_t* dmin16,
                                uint8_t packed[12], uint8_t L[kQK]) {
  AffineFit fits[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_affine(x + 32 * j, 32, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  *d16 = f32_to_f16(max_scale / 63.0f);
  *dmin16 = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(*d16), dmin = f16_to_f32(*dmin16);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? static_cast<uint8_t>(std::clamp(round_int(fits[j].scale / d), 0, 63)) : 0;
    m[j] = dmin > 0 ? static_cast<uint8_t>(std::clamp(round_int(fits[j].min / dmin), 0, 63)) : 0;
  }
  pack_q4k_scales(sc, m, packed);
  for (int j = 0; j < 8; ++j) {
    const float ds = d * sc[j], dm = dmin * m[j];
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] =
          ds > 0 ? static_cast<uint8_t>(std::clamp(round_int((x[32 * j + i] + dm) / ds), 0, nmax))
                 : 0;
  }
}

}  // namespace

void pack_q4k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t p[12]) {
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void pack_q3k_scales(const int8_t sc[16], uint8_t p[12]) {
  uint8_t u[16];
  for (int k = 0; k < 16; ++k) u[k] = static_cast<uint8_t>((sc[k] + 32) & 63);
  for (int i = 0; i < 4; ++i) {
    p[i] = static_cast<uint8_t>((u[i] & 15) | ((u[8 + i] & 15) << 4));
    p[4 + i] = static_cast<uint8_t>((u[4 + i] & 15) | ((u[12 + i] & 15) << 4));
    p[8 + i] = static_cast<uint8_t>((u[i] >> 4) | ((u[4 + i] >> 4) << 2) | ((u[8 + i] >> 4) << 4) |
                                    ((u[12 + i] >> 4) << 6));
  }
}

void dequantize_q2_k(const BlockQ2_K* blocks, float* out, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, out += kQK) {
    const BlockQ2_K& blk = blocks[b];
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    for (int e = 0; e < int(kQK); ++e) {
      const uint8_t sc = blk.scales[e / 16];
      const float dl = d * (sc & 15), ml = dmin * (sc >> 4);
      out[e] = dl * q2k_level(blk.qs, e) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* blocks, float* out, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, out += kQK) {
    const BlockQ3_K& blk = blocks[b];
    const float d = f16_to_f32(blk.d);
    int8_t sc[16];
    unpack_q3k_scales(blk.scales, sc);
    for (int e = 0; e < int(kQK); ++e)
      out[e] = d * sc[e / 16] * (q3k_level(blk.qs, blk.hmask, e) - 4);
  }
}

void dequantize_q4_k(const BlockQ4_K* blocks, float* out, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, out += kQK) {
    const BlockQ4_K& blk = blocks[b];
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(blk.scales, sc, m);
    for (int c = 0; c < 4; ++c) {
      const float d0 = d * sc[2 * c], m0 = dmin * m[2 * c];
      const float d1 = d * sc[2 * c + 1], m1 = dmin * m[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = blk.qs[32 * c + l];
        out[64 * c + l] = d0 * (q & 15) - m0;
        out[64 * c + 32 + l] = d1 * (q >> 4) - m1;
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* blocks, float* out, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, out += kQK) {
    const BlockQ5_K& blk = blocks[b];
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(blk.scales, sc, m);
    for (int c = 0; c < 4; ++c) {
      const float d0 = d * sc[2 * c], m0 = dmin * m[2 * c];
      const float d1 = d * sc[2 * c + 1], m1 = dmin * m[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = blk.qs[32 * c + l], h = blk.qh[l];
        out[64 * c + l] = d0 * ((q & 15) | (((h >> (2 * c)) & 1) << 4)) - m0;
        out[64 * c + 32 + l] = d1 * ((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) - m1;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* blocks, float* out, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, out += kQK) {
    const BlockQ6_K& blk = blocks[b];
    const float d = f16_to_f32(blk.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      float* y = out + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4),
                          (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                          (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int g = 0; g < 4; ++g) {
          const int e = 128 * h + 32 * g + l;
          y[32 * g + l] = d * blk.scales[e / 16] * (q[g] - 32);
        }
      }
    }
  }
}

void quantize_q2_k(const float* x, BlockQ2_K* blocks, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ2_K& blk = blocks[b];
    AffineFit fits[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      fits[j] = fit_affine(x + 16 * j, 16, 3);
      max_scale = std::max(max_scale, fits[j].scale);
      max_min = std::max(max_min, fits[j].min);
    }
    blk.d = f32_to_f16(max_scale / 15.0f);
    blk.dmin = f32_to_f16(max_min / 15.0f);
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    std::memset(blk.qs, 0, sizeof blk.qs);
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0 ? std::clamp(round_int(fits[j].scale / d), 0, 15) : 0;
      const int m = dmin > 0 ? std::clamp(round_int(fits[j].min / dmin), 0, 15) : 0;
      blk.scales[j] = static_cast<uint8_t>(sc | (m << 4));
      const float ds = d * sc, dm = dmin * m;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int q = ds > 0 ? std::clamp(round_int((x[e] + dm) / ds), 0, 3) : 0;
        const LowBitSlot slot = low_bit_slot(e);
        blk.qs[slot.byte] |= static_cast<uint8_t>(q << slot.shift);
      }
    }
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* blocks, size_t n) {
  PITH_CHECK(n % kQK == 0);
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ3_K& blk = blocks[b];
    float scales[16];
    const float max_scale = fit_symmetric_subblocks(x, -4, scales);
    // The largest sub-block scale maps to -32, the end of the 6-bit range with one more level.
    blk.d = f32_to_f16(max_scale / -32.0f);
    const float d = f16_to_f32(blk.d);
    int8_t sc[16];
    std::memset(blk.qs, 0, sizeof blk.qs);
    std::memset(blk.hmask, 0, sizeof blk.hmask);
    for (int j = 0; j < 16; ++j) {
      sc[j] = static_cast<int8_t>(d != 0 ? std::clamp(round_int(scales[j] / d), -32, 31) : 0);
      const float ds = d * sc[j];
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int q = (ds != 0 ? std::clamp(round_int(x[e] / ds), -4, 3) : 0) + 4;
        const LowBitSlot slot = low_bit_slot(e);
        blk.qs[slot.byte] |= static_cast<uint8_t>((q & 3) << slot.shift);
        blk.hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << slot.hbit);
      }
    }
    pack_q3k_scales(sc, blk.scales);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* blocks, size_t n) {
  PITH_CHECK(n % kQK == 0);
  uint8_t L[kQK];
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ4_K& blk = blocks[b];
    quantize_affine_superblock(x, 15, &blk.d, &blk.dmin, blk.scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        blk.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* blocks, size_t n) {
  PITH_CHECK(n % kQK == 0);
  uint8_t L[kQK];
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ5_K& blk = blocks[b];
    quantize_affine_superblock(x, 31, &blk.d, &blk.dmin, blk.scales, L);
    std::memset(blk.qh, 0, sizeof blk.qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        blk.qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        blk.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* blocks, size_t n) {
  PITH_CHECK(n % kQK == 0);
  uint8_t L[kQK];
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ6_K& blk = blocks[b];
    float scales[16];
    const float max_scale = fit_symmetric_subblocks(x, -32, scales);
    // The largest sub-block scale maps to -128, the end of int8 with one more level.
    blk.d = f32_to_f16(max_scale / -128.0f);
    const float d = f16_to_f32(blk.d);
    for (int j = 0; j < 16; ++j) {
      blk.scales[j] =
          static_cast<int8_t>(d != 0 ? std::clamp(round_int(scales[j] / d), -128, 127) : 0);
      const float ds = d * blk.scales[j];
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = static_cast<uint8_t>(
            ds != 0 ? std::clamp(round_int(x[16 * j + i] / ds), -32, 31) + 32 : 32);
    }
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* e = L + 128 * h + l;  // e[0], e[32], e[64], e[96]
        blk.ql[64 * h + l] = static_cast<uint8_t>((e[0] & 15) | ((e[64] & 15) << 4));
        blk.ql[64 * h + 32 + l] = static_cast<uint8_t>((e[32] & 15) | ((e[96] & 15) << 4));
        blk.qh[32 * h + l] = static_cast<uint8_t>((e[0] >> 4) | ((e[32] >> 4) << 2) |
                                                  ((e[64] >> 4) << 4) | ((e[96] >> 4) << 6));
      }
  }
}

}  // namespace pith
