// The codec of ggml's non-linear 4-bit blocks (IQ4_NL, IQ4_XS; layouts in formats/dtype.h):
// dequantisation to f32, the reference every kernel is tested against, and quantisation from
// f32, for `pith model gen` and tests. IQ4_NL lengths are multiples of 32, IQ4_XS ones of 256.
//
// These are the 4-bit types of the files people download beside the K-quant mixes (llama.cpp's
// IQ4_XS and IQ4_NL file types, and its fallback for IQ4_XS matrices whose rows are not whole
// super-blocks). The quantisers are pith's own (a few candidate scales per block, each refitted
// by least squares; see iquants.cpp); llama.cpp reads only the bit layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace pith {

// The 16 levels a 4-bit index selects, ascending (ggml's kvalues_iq4nl): every level fits an
// int8, so an integer dot with int8 activations is exact.
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Sub-block j's signed scale multiplier ls_j - 32 (in [-32, 31]) of an IQ4_XS block.
inline int iq4xs_subblock_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

void dequantize_iq4_nl(const BlockIQ4_NL* blocks, float* out, size_t n);
void dequantize_iq4_xs(const BlockIQ4_XS* blocks, float* out, size_t n);

void quantize_iq4_nl(const float* x, BlockIQ4_NL* blocks, size_t n);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* blocks, size_t n);

}  // namespace pith
