// Activation quantisation for K-quant weights and the portable K-quant dot products (see
// matmul_kernels.h): the reference the SIMD K-quant kernels are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp16.h"
#include "engine/kernels/matmul_kernels.h"
#include "formats/kquants.h"

namespace pith::kernels {

void quantize_act_q8k(const float* x, ActQ8K* out, size_t n) {
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    ActQ8K& a = out[b];
    float amax = 0;
    for (size_t i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    a.d = act_q8k_scale(amax);
    const float id = a.d != 0.0f ? 1.0f / a.d : 0.0f;
    for (size_t i = 0; i < kQK; ++i)
      a.qs[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
    for (size_t g = 0; g < 16; ++g) {
      int s = 0;
      for (size_t i = 0; i < 16; ++i) s += a.qs[16 * g + i];
      a.bsums[g] = static_cast<int16_t>(s);
    }
  }
}

float dot_q2k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks) {
  const BlockQ2_K* w = reinterpret_cast<const BlockQ2_K*>(row);
  float acc = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    int32_t sub[16] = {};  // Σ q·a per 16-element sub-block, q in [0, 3]
    for (int e = 0; e < int(kQK); ++e) sub[e / 16] += q2k_level(w[b].qs, e) * a[b].qs[e];
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 16; ++s) {
      sumi += (w[b].scales[s] & 15) * sub[s];
      summ += (w[b].scales[s] >> 4) * a[b].bsums[s];
    }
    acc += a[b].d * (f16_to_f32(w[b].d) * static_cast<float>(sumi) -
                     f16_to_f32(w[b].dmin) * static_cast<float>(summ));
  }
  return acc;
}

float dot_q3k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks) {
  const BlockQ3_K* w = reinterpret_cast<const BlockQ3_K*>(row);
  float acc = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    int8_t sc[16];
    unpack_q3k_scales(w[b].scales, sc);
    int32_t sub[16] = {};  // Σ q·a per sub-block, q in [0, 7] (the value is q - 4)
    for (int e = 0; e < int(kQK); ++e)
      sub[e / 16] += q3k_level(w[b].qs, w[b].hmask, e) * a[b].qs[e];
    int32_t sumi = 0;  // Σ_s sc_s Σ (q - 4) a = Σ_s sc_s (Σ q a - 4 Σ a)
    for (int s = 0; s < 16; ++s) sumi += sc[s] * (sub[s] - 4 * a[b].bsums[s]);
    acc += a[b].d * (f16_to_f32(w[b].d) * static_cast<float>(sumi));
  }
  return acc;
}

float dot_q4k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks) {
  const BlockQ4_K* w = reinterpret_cast<const BlockQ4_K*>(row);
  float acc = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t sc[8], m[8];
    unpack_q4k_scales(w[b].scales, sc, m);
    int32_t sumi = 0, summ = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = w[b].qs[32 * c + l];
        s0 += (q & 15) * a[b].qs[64 * c + l];
        s1 += (q >> 4) * a[b].qs[64 * c + 32 + l];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    acc += a[b].d * (f16_to_f32(w[b].d) * static_cast<float>(sumi) -
                     f16_to_f32(w[b].dmin) * static_cast<float>(summ));
  }
  return acc;
}

float dot_q5k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks) {
  const BlockQ5_K* w = reinterpret_cast<const BlockQ5_K*>(row);
  float acc = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t sc[8], m[8];
    unpack_q4k_scales(w[b].scales, sc, m);
    int32_t sumi = 0, summ = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = w[b].qs[32 * c + l], h = w[b].qh[l];
        s0 += ((q & 15) | (((h >> (2 * c)) & 1) << 4)) * a[b].qs[64 * c + l];
        s1 += ((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) * a[b].qs[64 * c + 32 + l];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    acc += a[b].d * (f16_to_f32(w[b].d) * static_cast<float>(sumi) -
                     f16_to_f32(w[b].dmin) * static_cast<float>(summ));
  }
  return acc;
}

float dot_q6k_scalar(const uint8_t* row, const ActQ8K* a, size_t n_blocks) {
  const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(row);
  float acc = 0;
  for (size_t b = 0; b < n_blocks; ++b) {
    int32_t sub[16] = {};  // Σ q·a per 16-element sub-block, q in [0, 63]
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4),
                          (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                          (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int g = 0; g < 4; ++g) {
          const int e = 128 * h + 32 * g + l;
          sub[e / 16] += q[g] * a[b].qs[e];
        }
      }
    }
    // Σ_j sc_j Σ (q - 32) a = Σ_j sc_j (Σ q a - 32 Σ a)
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += w[b].scales[j] * (sub[j] - 32 * a[b].bsums[j]);
    acc += a[b].d * (f16_to_f32(w[b].d) * static_cast<float>(sumi));
  }
  return acc;
}

}  // namespace pith::kernels
