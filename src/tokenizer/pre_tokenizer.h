// PreTokenizer: splits text into "words" with a Unicode-aware regex (PCRE2, UTF + UCP) before
// byte-level BPE runs on each word, as GPT-2, Llama 3 and Qwen2 tokenizers do. The regex is
// chosen from the model: GGUF `tokenizer.ggml.pre` names map to the patterns below, and a
// tokenizer.json `Split` pre-tokenizer supplies its own. The pieces returned cover the input
// exactly: regex matches and, in between, any unmatched gaps (HF "Isolated" behaviour).
//
// Invalid UTF-8 is accepted (PCRE2_MATCH_INVALID_UTF): invalid bytes are never part of a
// match, so they end up in gap pieces of their own and byte-level BPE encodes them as byte
// tokens; nothing is lost or replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pith {

class PreTokenizer {
 public:
  // The split regex for a GGUF pre-tokenizer name. Throws pith::Error for names pith does not
  // know, listing the supported ones.
  static std::string regex_for(std::string_view pre_name);

  // Compiles `pattern` (JIT when available). Throws pith::Error on a bad pattern.
  explicit PreTokenizer(const std::string& pattern);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Appends (offset, length) of each piece of `text`, in order. Thread-safe (const).
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces) const;

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> re_;
};

}  // namespace pith
