// The element type of the KV cache (--kv-dtype). F32 keeps K/V exactly as the forward computed
// them; F16 and BF16 halve the bytes per token, so a budget holds twice the tokens and
// attention over a long context reads half the memory (what llama.cpp stores by default: F16).
// F16 keeps 10 mantissa bits (K/V rows after RoPE and norms sit well inside its range); BF16
// keeps 7 with f32's range. Auto lets the backend choose: make_backend gives the CPU engine
// F16 (an Engine constructed with Auto keeps F32), the CUDA backend its activation type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pith {

enum class KvDType : uint8_t { Auto, F32, F16, BF16 };

// "auto", "f32", "f16", "bf16".
std::string_view kv_dtype_name(KvDType t);
// The inverse of kv_dtype_name; throws pith::Error naming the accepted values.
KvDType parse_kv_dtype(std::string_view name);
// Bytes per element of a concrete type (Auto: 0).
inline size_t kv_dtype_bytes(KvDType t) {
  return t == KvDType::F32 ? 4 : t == KvDType::Auto ? 0 : 2;
}

}  // namespace pith
