// The codec of ggml's K-quant blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; layouts in formats/dtype.h):
// dequantisation to f32, the reference every kernel is tested against, and quantisation from
// f32, for `pith model gen` and tests. All lengths are multiples of kQK (256).
//
// The quantisers are pith's own (a small search per sub-block, then a least-squares refit of
// its scale and min; see kquants.cpp); the files they write load in llama.cpp, which only
// reads the bit layout, but their values differ from llama.cpp's quantiser's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace pith {

// The 8 six-bit sub-block scales and mins of a Q4_K/Q5_K block, packed in 12 bytes: bytes
// 0-3 hold sc[0..3] in their low 6 bits, bytes 4-7 m[0..3]; byte 8 + i holds the low 4 bits of
// sc[4 + i] (low nibble) and m[4 + i] (high nibble), whose top 2 bits are the top 2 bits of
// bytes i (sc) and 4 + i (m).
// (Inline: the kernels unpack once per block.)
inline void unpack_q4k_scales(const uint8_t p[12], uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = p[j] & 63;
    m[j] = p[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((p[j + 8] & 15) | ((p[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
  }
}
void pack_q4k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t packed[12]);

// The 16 six-bit sub-block scales of a Q3_K block, packed in 12 bytes, as signed values
// sc - 32: byte i (i < 8) holds the low 4 bits of sc[i] (low nibble) and sc[8 + i] (high
// nibble); byte 8 + i holds the top 2 bits of sc[i], sc[4 + i], sc[8 + i], sc[12 + i] in its
// bits 0-1, 2-3, 4-5, 6-7.
inline void unpack_q3k_scales(const uint8_t p[12], int8_t sc[16]) {
  for (int i = 0; i < 4; ++i) {
    const uint8_t h = p[8 + i];
    sc[i] = static_cast<int8_t>(((p[i] & 15) | ((h & 3) << 4)) - 32);
    sc[4 + i] = static_cast<int8_t>(((p[4 + i] & 15) | (((h >> 2) & 3) << 4)) - 32);
    sc[8 + i] = static_cast<int8_t>(((p[i] >> 4) | (((h >> 4) & 3) << 4)) - 32);
    sc[12 + i] = static_cast<int8_t>(((p[4 + i] >> 4) | (((h >> 6) & 3) << 4)) - 32);
  }
}
void pack_q3k_scales(const int8_t sc[16], uint8_t packed[12]);

// Where element e (0..255) of a Q2_K / Q3_K block keeps its bits (dtype.h): its 2 low bits are
// bits 2j, 2j + 1 of qs[byte], Q3_K's third bit is bit `hbit` of hmask[e % 32].
struct LowBitSlot {
  int byte, shift, hbit;
};
inline LowBitSlot low_bit_slot(int e) {
  const int half = e / 128, j = (e % 128) / 32;
  return {32 * half + e % 32, 2 * j, 4 * half + j};
}
// Q2_K's level q (0..3) and Q3_K's level q + 4 (0..7) of element e.
inline int q2k_level(const uint8_t qs[64], int e) {
  const LowBitSlot s = low_bit_slot(e);
  return (qs[s.byte] >> s.shift) & 3;
}
inline int q3k_level(const uint8_t qs[64], const uint8_t hmask[32], int e) {
  const LowBitSlot s = low_bit_slot(e);
  return ((qs[s.byte] >> s.shift) & 3) | (((hmask[e % 32] >> s.hbit) & 1) << 2);
}

void dequantize_q2_k(const BlockQ2_K* blocks, float* out, size_t n);
void dequantize_q3_k(const BlockQ3_K* blocks, float* out, size_t n);
void dequantize_q4_k(const BlockQ4_K* blocks, float* out, size_t n);
void dequantize_q5_k(const BlockQ5_K* blocks, float* out, size_t n);
void dequantize_q6_k(const BlockQ6_K* blocks, float* out, size_t n);

void quantize_q2_k(const float* x, BlockQ2_K* blocks, size_t n);
void quantize_q3_k(const float* x, BlockQ3_K* blocks, size_t n);
void quantize_q4_k(const float* x, BlockQ4_K* blocks, size_t n);
void quantize_q5_k(const float* x, BlockQ5_K* blocks, size_t n);
void quantize_q6_k(const float* x, BlockQ6_K* blocks, size_t n);

}  // namespace pith
