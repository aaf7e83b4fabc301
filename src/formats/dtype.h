// Element types of weight tensors, with GGUF's numeric codes (ggml_type) so a GGUF tensor
// type maps directly. Block-quantised types store `block_size` elements in `block_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pith {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  MXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // lower-case, as on the command line: "f32", "q8_0"
  size_t block_size;      // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// Returns nullopt for GGUF types pith does not implement.
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
// ggml's name of any ggml_type code ("q4_K", "iq2_xxs"), or "type <n>" for an unknown one: for
// errors about files whose tensors pith cannot read.
std::string ggml_type_name(uint32_t ggml_type);
// "f32, f16, ..., q6_K": the types pith reads, for the same errors.
std::string supported_dtype_names();
const DTypeInfo& dtype_info(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes taken by one row of `n` elements; n must be a multiple of the block size.
size_t row_bytes(DType t, size_t n);

// Q8_0: 32 int8 values sharing one f16 scale (34 bytes), as in GGUF.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: 32 4-bit values (offset 8) sharing one f16 scale (18 bytes). Element j < 16 is the low
// nibble of qs[j], element j + 16 the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: 32 4-bit values q in [0, 15], value = d * q + m (20 bytes); nibbles as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset (the block's minimum)
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: 32 5-bit values q in [0, 31], value = d * (q - 16) (22 bytes). The low four bits are
// the nibbles of Q4_0's layout; bit 4 of element j is bit j of qh read as a little-endian
// uint32 (a byte array, as in ggml, so the struct has no padding).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: Q5_0's quants without the offset, value = d * q + m (24 bytes).
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// K-quants: super-blocks of 256 values (kQK values), byte-identical to ggml's layouts so that
// llama.cpp's files load. Codec (dequantise, quantise) in formats/kquants.h.
inline constexpr size_t kQK = 256;

// Q2_K and Q3_K: 16 sub-blocks of 16. Element e = 128n + 32j + l (n < 2, j < 4, l < 32) is in
// sub-block e / 16 and has the 2 bits (qs[32n + l] >> 2j) & 3.
// Q2_K: value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q in [0, 3].
struct BlockQ2_K {
  uint8_t scales[16];  // per sub-block: 4-bit scale (low nibble), 4-bit min (high nibble)
  uint8_t qs[64];
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: value = d * (sc[s] - 32) * (q - 4), q in [0, 7]: the 2 bits above plus 4 x bit (4n + j)
// of hmask[l]; the 16 six-bit sc packed in `scales` (formats/kquants.h: unpack_q3k_scales).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32, value = d * sc[j] * q - dmin * m[j] with q in [0, 15] and 6-bit
// sc/m packed into `scales` (formats/kquants.h: unpack_q4k_scales). qs[32 * c + l] holds
// element 64c + l in its low nibble and element 64c + 32 + l in its high nibble.
struct BlockQ4_K {
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit: q in [0, 31], bit 4 of element 64c + l is bit 2c of qh[l], of
// element 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16, value = d * scales[j] * (q - 32) with q in [0, 63]. In each half
// h (128 elements), for l < 32: element 128h + l has low nibble ql[64h + l] & 15, element
// +32 ql[64h + 32 + l] & 15, +64 ql[64h + l] >> 4, +96 ql[64h + 32 + l] >> 4; their top two
// bits are bits 0-1, 2-3, 4-5, 6-7 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// The non-linear 4-bit types: each 4-bit index selects one of 16 int8 levels (iquants.h:
// kIq4nlLevels, spaced closer near zero, where most weights are) times the block's scale.
// IQ4_NL: 32 indices with one f16 scale (18 bytes); index j < 16 is the low nibble of qs[j],
// j + 16 the high one, as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 8 sub-blocks of 32 in a 256-element super-block (136 bytes). Sub-block j's scale is
// d * (ls_j - 32), ls_j a 6-bit value: its low 4 bits are nibble j % 2 of scales_l[j / 2], its
// top 2 bits bits 2j, 2j + 1 of scales_h. Sub-block j's indices are qs[16j .. 16j + 16) laid
// out as IQ4_NL's.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// MXFP4 (formats/mxfp4.h): 32 FP4 E2M1 codes sharing one E8M0 power-of-two exponent (17
// bytes); code j < 16 is the low nibble of qs[j], j + 16 the high one, as in Q4_0.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace pith
