// SpmSegmenter: SentencePiece-style BPE as llama.cpp runs it for `tokenizer.ggml.model =
// llama` (Llama 2, TinyLlama, Mistral). The text (spaces already replaced by "▁") starts as
// one symbol per UTF-8 character; the adjacent pair whose concatenation is a vocab token with
// the highest score merges first (leftmost on ties), until no pair forms a token. A final
// symbol that is not a token is emitted as byte-fallback tokens <0xNN>, one per byte.
// Bytes that are not part of valid UTF-8 are symbols of their own (so they come out as
// byte-fallback tokens and decode back unchanged).
//
// Cost: O(n log n) per fragment (heap of candidate pairs over a linked list of symbols).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"

namespace pith {

class SpmSegmenter {
 public:
  // `index` maps token text to id, `scores` is per id, `byte_tokens[b]` is the id of <0xNN>
  // (or -1), `unk_id` is used for a byte with no byte token (-1: drop it). All referenced
  // objects must outlive the segmenter.
  SpmSegmenter(const TokenIndex& index, const std::vector<float>& scores,
               const std::array<int32_t, 256>& byte_tokens, int32_t unk_id)
      : index_(index), scores_(scores), byte_tokens_(byte_tokens), unk_id_(unk_id) {}

  // Appends the ids of `text` (already escaped) to `out`.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  const TokenIndex& index_;
  const std::vector<float>& scores_;
  const std::array<int32_t, 256>& byte_tokens_;
  int32_t unk_id_;
};

}  // namespace pith
