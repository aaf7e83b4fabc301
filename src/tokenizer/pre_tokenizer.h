// PreTokenizer: splits text into "words" with Unicode-aware regexes (PCRE2, UTF + UCP) before
// byte-level BPE runs on each word, as GPT-2, Llama 3, Qwen2, DeepSeek, Falcon and StarCoder
// tokenizers do. The regexes are chosen from the model: GGUF `tokenizer.ggml.pre` names map to
// the pattern lists in pre_tokenizer.cpp, and tokenizer.json `Split` pre-tokenizers supply their
// own. Several patterns apply in sequence (HF `Sequence` of `Split`s, llama.cpp's regex list):
// each one splits every piece the previous one produced, seeing only that piece. The pieces
// returned cover the input exactly: regex matches and, in between, any unmatched gaps (HF
// "Isolated" behaviour).
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
  // The split regexes, applied in order, for a GGUF pre-tokenizer name. Throws pith::Error for
  // names pith does not know, listing the supported ones.
  static std::vector<std::string> regexes_for(std::string_view pre_name);

  // Compiles each of `patterns` (JIT when available). Throws pith::Error on a bad pattern or
  // an empty list.
  explicit PreTokenizer(std::vector<std::string> patterns);
  explicit PreTokenizer(const std::string& pattern)
      : PreTokenizer(std::vector<std::string>{pattern}) {}
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  const std::vector<std::string>& patterns() const { return patterns_; }

  // Appends (offset, length) of each piece of `text`, in order. Thread-safe (const).
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces) const;

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::unique_ptr<Compiled> re_;  // one compiled regex per pattern
};

}  // namespace pith
