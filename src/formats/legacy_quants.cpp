#include "formats/legacy_quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "common/fp16.h"

namespace pith {

namespace {

// The 5-bit quant of element j: its nibble plus bit j of qh as bit 4.
inline int q5_quant(const uint8_t qs[16], uint32_t qh, size_t j) {
  return nibble_quant(qs, j) | static_cast<int>(((qh >> j) & 1u) << 4);
}

// Packs 32 quants (each < 32) into nibbles and, for 5-bit types, the fifth bits.
void pack_quants(const uint8_t q[32], uint8_t qs[16], uint8_t* qh) {
  uint32_t high = 0;
  for (size_t j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    high |= uint32_t{q[j]} >> 4 << j;
    high |= uint32_t{q[j + 16]} >> 4 << (j + 16);
  }
  if (qh != nullptr) std::memcpy(qh, &high, 4);
}

// llama.cpp's affine rounding: d = (max - min) / levels, q = trunc((x - min) / d + 0.5)
// clamped to levels. Returns d and sets *min.
float quantize_affine(const float* x, int levels, uint8_t q[32], float* min_out) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (size_t j = 0; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  const float d = (hi - lo) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (size_t j = 0; j < 32; ++j)
    q[j] = static_cast<uint8_t>(std::min(levels, static_cast<int>((x[j] - lo) * id + 0.5f)));
  *min_out = lo;
  return d;
}

}  // namespace

void dequantize_q4_1(const BlockQ4_1* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blocks[b].d), m = f16_to_f32(blocks[b].m);
    for (size_t j = 0; j < 32; ++j)
      out[b * 32 + j] = static_cast<float>(nibble_quant(blocks[b].qs, j)) * d + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const uint32_t qh = q5_high_bits(blocks[b].qh);
    for (size_t j = 0; j < 32; ++j)
      out[b * 32 + j] = static_cast<float>(q5_quant(blocks[b].qs, qh, j) - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1* blocks, float* out, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blocks[b].d), m = f16_to_f32(blocks[b].m);
    const uint32_t qh = q5_high_bits(blocks[b].qh);
    for (size_t j = 0; j < 32; ++j)
      out[b * 32 + j] = static_cast<float>(q5_quant(blocks[b].qs, qh, j)) * d + m;
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* blocks, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    float min;
    blocks[b].d = f32_to_f16(quantize_affine(x + b * 32, 15, q, &min));
    blocks[b].m = f32_to_f16(min);
    pack_quants(q, blocks[b].qs, nullptr);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* blocks, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    float min;
    blocks[b].d = f32_to_f16(quantize_affine(x + b * 32, 31, q, &min));
    blocks[b].m = f32_to_f16(min);
    pack_quants(q, blocks[b].qs, blocks[b].qh);
  }
}

// Q4_0's rounding with 5 bits: the signed value of largest magnitude maps to q = 0 (-16 d).
void quantize_q5_0(const float* x, BlockQ5_0* blocks, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0, max = 0;
    for (size_t j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t q[32];
    for (size_t j = 0; j < 32; ++j)
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(xb[j] * id + 16.5f)));
    blocks[b].d = f32_to_f16(d);
    pack_quants(q, blocks[b].qs, blocks[b].qh);
  }
}

}  // namespace pith
