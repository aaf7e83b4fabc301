// The codec of MXFP4 blocks (OCP microscaling FP4, ggml type 39; layout in formats/dtype.h):
// dequantisation to f32, the reference every kernel is tested against, and quantisation from
// f32 for `pith model gen` and tests. Lengths are multiples of 32.
//
// MXFP4 is how gpt-oss ships its expert weights (the checkpoints store them so, and llama.cpp's
// converter and its MXFP4_MOE file type keep them so). Each element is an FP4 E2M1 number, one
// of ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, times the block's power of two. As ggml does, pith keeps the
// levels doubled (int8 ±{0, 1, 2, 3, 4, 6, 8, 12}) and halves the scale, so the kernels multiply
// them exactly as IQ4_NL's table levels with int8 activations.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace pith {

// Twice the E2M1 value of each 4-bit code (bit 3 is the sign).
inline constexpr int8_t kMxfp4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The block scale for the doubled levels: half of the E8M0 exponent's 2^(e - 127), i.e.
// 2^(e - 128), exact in f32 (e < 2 are subnormals; e = 255, NaN in the OCP format, reads as
// 2^127 as ggml reads it).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : uint32_t{e - 1u} << 23;
  return std::bit_cast<float>(bits);
}

void dequantize_mxfp4(const BlockMXFP4* blocks, float* out, size_t n);
void quantize_mxfp4(const float* x, BlockMXFP4* blocks, size_t n);

}  // namespace pith
