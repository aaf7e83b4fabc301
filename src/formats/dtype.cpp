#include "formats/dtype.h"

#include <iterator>

#include "common/error.h"

namespace pith {

namespace {
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "f32", 1, 4},
    {DType::F16, "f16", 1, 2},
    {DType::BF16, "bf16", 1, 2},
    {DType::Q8_0, "q8_0", 32, sizeof(BlockQ8_0)},
    {DType::Q4_0, "q4_0", 32, sizeof(BlockQ4_0)},
    {DType::Q4_1, "q4_1", 32, sizeof(BlockQ4_1)},
    {DType::Q5_0, "q5_0", 32, sizeof(BlockQ5_0)},
    {DType::Q5_1, "q5_1", 32, sizeof(BlockQ5_1)},
    {DType::Q2_K, "q2_k", kQK, sizeof(BlockQ2_K)},
    {DType::Q3_K, "q3_k", kQK, sizeof(BlockQ3_K)},
    {DType::Q4_K, "q4_k", kQK, sizeof(BlockQ4_K)},
    {DType::Q5_K, "q5_k", kQK, sizeof(BlockQ5_K)},
    {DType::Q6_K, "q6_k", kQK, sizeof(BlockQ6_K)},
    {DType::IQ4_NL, "iq4_nl", 32, sizeof(BlockIQ4_NL)},
    {DType::IQ4_XS, "iq4_xs", kQK, sizeof(BlockIQ4_XS)},
    {DType::MXFP4, "mxfp4", 32, sizeof(BlockMXFP4)},
};

// ggml's type names by code (ggml.c's type traits), for error messages; codes 4 and 5 were
// removed from ggml and 31-33 are unused.
constexpr std::string_view kGgmlNames[] = {
    "f32",    "f16",   "q4_0",  "q4_1",   "",      "",      "q5_0",    "q5_1",   "q8_0",    "q8_1",
    "q2_K",   "q3_K",  "q4_K",  "q5_K",   "q6_K",  "q8_K",  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
    "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8",    "i16",   "i32",     "i64",    "f64",     "iq1_m",
    "bf16",   "",      "",      "",       "tq1_0", "tq2_0", "",        "",       "",        "mxfp4",
};
}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == ggml_type) return t;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t ggml_type) {
  if (ggml_type < std::size(kGgmlNames) && !kGgmlNames[ggml_type].empty())
    return std::string(kGgmlNames[ggml_type]);
  return "type " + std::to_string(ggml_type);
}

std::string supported_dtype_names() {
  std::string out;
  for (const auto& t : kTypes) {
    if (!out.empty()) out += ", ";
    out += ggml_type_name(static_cast<uint32_t>(t.type));
  }
  return out;
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
