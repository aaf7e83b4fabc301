// The codec of ggml's 32-element "legacy" blocks with a 5th bit or an offset (Q4_1, Q5_0,
// Q5_1; layouts in formats/dtype.h): dequantisation to f32, the reference the kernels are
// tested against, and quantisation from f32 with llama.cpp's reference rounding (the choice
// llama.cpp's quantiser makes without an importance matrix), for `pith model gen`. All lengths
// are multiples of 32. llama.cpp's K-quant mixes give these types to matrices whose rows are
// not whole 256-element super-blocks (Q4_K -> Q5_0, Q5_K -> Q5_1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/dtype.h"

namespace pith {

// The 32 fifth bits of a Q5 block, bit j for element j.
inline uint32_t q5_high_bits(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);  // little-endian, as ggml stores it
  return v;
}

// Quant j (0..31) of a 4-bit nibble array: element j < 16 is the low nibble of qs[j], element
// j + 16 the high one.
inline int nibble_quant(const uint8_t qs[16], size_t j) {
  return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

void dequantize_q4_1(const BlockQ4_1* blocks, float* out, size_t n);
void dequantize_q5_0(const BlockQ5_0* blocks, float* out, size_t n);
void dequantize_q5_1(const BlockQ5_1* blocks, float* out, size_t n);

void quantize_q4_1(const float* x, BlockQ4_1* blocks, size_t n);
void quantize_q5_0(const float* x, BlockQ5_0* blocks, size_t n);
void quantize_q5_1(const float* x, BlockQ5_1* blocks, size_t n);

}  // namespace pith
