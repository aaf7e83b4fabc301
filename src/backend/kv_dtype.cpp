// KvDType names (kv_dtype.h).
#include "backend/kv_dtype.h"

#include "common/error.h"

namespace pith {

std::string_view kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::Auto:
      return "auto";
    case KvDType::F32:
      return "f32";
    case KvDType::F16:
      return "f16";
    case KvDType::BF16:
      return "bf16";
  }
  return "?";
}

KvDType parse_kv_dtype(std::string_view name) {
  for (KvDType t : {KvDType::Auto, KvDType::F32, KvDType::F16, KvDType::BF16})
    if (name == kv_dtype_name(t)) return t;
  fail("--kv-dtype: '{}' is not one of auto, f32, f16, bf16", name);
}

}  // namespace pith
