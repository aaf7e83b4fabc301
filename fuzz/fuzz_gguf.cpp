// libFuzzer target: the GGUF reader (formats/gguf.h) on arbitrary bytes, as a hostile model file
// reaches it: open, read each tensor's byte range, build the tokenizer from its vocabulary.
// Every malformed input must end in pith::Error, never a crash, leak or out-of-bounds read.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "formats/gguf.h"
#include "fuzz_scratch.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pith::fuzz::write_scratch("model.gguf", data, size);
  if (path.empty()) return 0;
  try {
    pith::GGUFFile file(path);
    for (const auto& t : file.tensors()) {  // the reader vouches for every tensor's range
      volatile uint8_t sink = t.n_bytes ? t.data[0] ^ t.data[t.n_bytes - 1] : 0;
      (void)sink;
    }
    if (file.has("tokenizer.ggml.model")) (void)pith::Tokenizer::from_gguf(file);
  } catch (const pith::Error&) {
  }
  return 0;
}
