// libFuzzer target: tokenizer.json (tokenizer/hf_tokenizer_json.h), as a Hugging Face model
// folder reaches the server: read the vocabulary, build the tokenizer, then encode and decode a
// fixed text with special tokens. Malformed files must end in pith::Error; a tokenizer that loads
// must encode to in-range ids.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "fuzz_scratch.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pith::fuzz::write_scratch("tokenizer.json", data, size);
  if (path.empty()) return 0;
  try {
    pith::Tokenizer tok =
        pith::Tokenizer::from_vocab(pith::read_hf_tokenizer(pith::fuzz::scratch_dir()), path);
    const std::string text = "Hello wörld\n  12345 <s>[INST] ünïcödé 🙂 </s>\t\xff";
    for (bool specials : {false, true}) {
      std::vector<int32_t> ids = tok.encode(text, true, specials);
      for (int32_t id : ids)
        if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) __builtin_trap();
      (void)tok.decode(ids);
    }
  } catch (const pith::Error&) {
  }
  return 0;
}
