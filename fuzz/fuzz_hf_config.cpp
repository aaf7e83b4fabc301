// libFuzzer target: a Hugging Face model folder's config.json (engine/hf_loader.h), as a
// downloaded or hostile checkpoint reaches `pith serve`: the architecture is recognised and the
// model configuration derived, or pith::Error says what is wrong. A configuration that loads must
// be one the engine can size buffers from (no zero heads, no overflowing products).
#include <cstdint>
#include <string>

#include "common/error.h"
#include "engine/hf_loader.h"
#include "fuzz_scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pith::fuzz::write_scratch("config.json", data, size);
  if (path.empty()) return 0;
  try {
    pith::ModelConfig c = pith::hf_model_config(pith::fuzz::scratch_dir());
    if (c.n_heads == 0 || c.n_kv_heads == 0 || c.head_dim == 0 || c.n_heads % c.n_kv_heads != 0)
      __builtin_trap();
  } catch (const pith::Error&) {
  }
  return 0;
}
