// Tokenizer::Impl: the lookup structures a Tokenizer builds once from its Vocab (token index,
// raw bytes per token, BPE merge table, pre-tokenizer, special-token matcher, SentencePiece
// segmenter) and the per-token decode step shared by Tokenizer::decode and StreamDecoder.
// Internal to src/tokenizer.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_merger.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm_segmenter.h"
#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer.h"

namespace pith {

struct Tokenizer::Impl {
  Impl(Vocab vocab, std::string source);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Vocab v;
  std::string source;
  bool spm_prefix = false;  // SentencePiece with add_space_prefix
  // SentencePiece: no token has "▁" right after another character, so the text can be cut
  // before every "▁" that follows a non-"▁" character and each piece segmented alone with
  // the same result (true for Llama 2 / Mistral vocabs; checked at load).
  bool spm_split_words = false;
  TokenIndex index;                // stored text → id
  TokenIndex raw_index;            // raw bytes → id of normal tokens (BPE ignore_merges)
  std::vector<std::string> bytes;  // id → raw bytes
  // The same bytes back to back (token i is flat[flat_off[i], flat_off[i+1])) with a per-id
  // "literal token" flag: decode reads two small arrays instead of chasing string objects.
  std::string flat;
  std::vector<uint32_t> flat_off;
  std::vector<uint8_t> literal;            // 1: control/unknown, 2: user-defined, 0: text
  std::array<int32_t, 256> byte_tokens{};  // byte → id of its byte token, -1 if none
  BpeMerger merger;
  std::optional<PreTokenizer> pre;  // byte-level BPE only (metaspace BPE splits at newlines)
  SpecialTokenMatcher specials;
  std::vector<int32_t> eog;  // sorted
  std::unique_ptr<SpmSegmenter> spm;

  void check_id(int32_t id) const;
  void encode(std::string_view text, bool add_special, bool parse_special, bool naive,
              std::vector<int32_t>& out) const;
  void encode_bpe_word(std::string_view word, bool naive, std::vector<int32_t>& out,
                       std::vector<int32_t>& scratch) const;

  // SentencePiece words already encoded during one encode() call: word → [begin, end) in
  // the output. Text repeats words a lot, and a lookup is 2-3x cheaper than segmenting again.
  // Lives only for the call (keys point into the call's text): nothing shared between threads.
  using WordCache = std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>>;
  template <typename EncodeFn>
  void encode_cached(std::string_view word, WordCache& cache, std::vector<int32_t>& out,
                     const EncodeFn& encode_word) const;

  // Appends the decoded bytes of `id` (already range-checked) to `out`. `strip_space` carries
  // SentencePiece's "drop one leading space" state from token to token (true at the start of a
  // text).
  void append_piece(std::string& out, int32_t id, bool skip_special, bool& strip_space) const;
};

}  // namespace pith
