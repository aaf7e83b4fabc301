// libFuzzer target: validation of an uploaded inferlet (runtime/interp_module.h), what
// POST /programs runs before a module is stored: parse and validate the binary, resolve every
// import against pith's host API, find _start. Anything else must be refused with pith::Error.
// Debian's libwabt.a is not instrumented, so coverage guidance sees pith's checks around the
// reader, not the reader's own branches; ASan still checks every access pith makes.
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "runtime/interp_module.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = pith::runtime::InterpModule::load(
        std::string_view(reinterpret_cast<const char*>(data), size));
    if (!m) __builtin_trap();
  } catch (const pith::Error&) {
  }
  return 0;
}
