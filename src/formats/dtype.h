// Element types of weight tensors, with GGUF's numeric codes (ggml_type) so a GGUF tensor
// type maps directly. Block-quantised types store `block_size` elements in `block_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pith {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // lower-case, as on the command line: "f32", "q8_0"
  size_t block_size;      // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// Returns nullopt for GGUF types pith does not implement.
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
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

}  // namespace pith
