// Tokenizer::Impl: the lookup structures a Tokenizer builds once from its Vocab (token index,
// raw bytes per token, BPE merge table, pre-tokenizer, special-token matcher, SentencePiece
// segmenter) and the per-token decode step shared by Tokenizer::decode and StreamDecoder.
// Internal to src/tokenizer.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
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
  bool spm_prefix = false;          // SentencePiece with add_space_prefix
  TokenIndex index;                 // stored text → id
  TokenIndex raw_index;             // raw bytes → id of normal tokens (BPE ignore_merges)
  std::vector<std::string> bytes;   // id → raw bytes
  std::array<int32_t, 256> byte_tokens{};  // byte → id of its byte token, -1 if none
  BpeMerger merger;
  std::optional<PreTokenizer> pre;
  SpecialTokenMatcher specials;
  std::vector<int32_t> eog;         // sorted
  std::unique_ptr<SpmSegmenter> spm;

  void check_id(int32_t id) const;
  void encode(std::string_view text, bool add_special, bool parse_special, bool naive,
              std::vector<int32_t>& out) const;
  void encode_bpe_word(std::string_view word, bool naive, std::vector<int32_t>& out) const;

  // Appends the decoded bytes of `id` to `out`. `strip_space` carries SentencePiece's
  // "drop one leading space" state from token to token (true at the start of a text).
  void append_piece(std::string& out, int32_t id, bool skip_special, bool& strip_space) const;
};

}  // namespace pith
