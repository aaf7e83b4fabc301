#include "formats/dtype.h"

#include "common/error.h"

namespace pith {

namespace {
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "f32", 1, 4},
    {DType::F16, "f16", 1, 2},
    {DType::BF16, "bf16", 1, 2},
    {DType::Q8_0, "q8_0", 32, sizeof(BlockQ8_0)},
    {DType::Q4_0, "q4_0", 32, sizeof(BlockQ4_0)},
};
}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == ggml_type) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  fail("unknown dtype {}", static_cast<uint32_t>(type));
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

size_t row_bytes(DType type, size_t n) {
  const auto& info = dtype_info(type);
  PITH_CHECK(n % info.block_size == 0);
  return n / info.block_size * info.block_bytes;
}

}  // namespace pith
