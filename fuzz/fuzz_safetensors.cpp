// libFuzzer target: the safetensors reader (formats/safetensors.h) on arbitrary bytes, as a
// hostile Hugging Face checkpoint reaches it: parse the header, then touch the first and last
// byte of every tensor the reader accepted. Malformed input must end in pith::Error.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "formats/safetensors.h"
#include "fuzz_scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pith::fuzz::write_scratch("model.safetensors", data, size);
  if (path.empty()) return 0;
  try {
    pith::SafetensorsFile file(path);
    for (const auto& t : file.tensors()) {
      if (file.find(t.name) != &t) __builtin_trap();  // the index must agree with the list
      volatile uint8_t sink = t.n_bytes ? t.data[0] ^ t.data[t.n_bytes - 1] : 0;
      (void)sink;
    }
  } catch (const pith::Error&) {
  }
  return 0;
}
