// libFuzzer target: the GGUF reader (formats/gguf.h) on arbitrary bytes, as a hostile model file
// reaches it: open, read each tensor's byte range, build the tokenizer from its vocabulary.
// Every malformed input must end in pith::Error, never a crash, leak or out-of-bounds read.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader maps a file: give it one (in /dev/shm when there is one, to stay in memory).
  static const std::string path = [] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/pith-fuzz-gguf-" + std::to_string(getpid()) + ".gguf";
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
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
