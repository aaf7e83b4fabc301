// Metaspace BPE: rank-ordered BPE merges over the UTF-8 characters of a text whose spaces are
// written as "▁" (U+2581), with "<0xNN>" byte tokens for characters the vocabulary lacks. This
// is Gemma 4's tokenizer (GGUF tokenizer.ggml.model "gemma4"; Hugging Face: a BPE model with
// byte_fallback behind a Replace(" ", "▁") normalizer). llama.cpp runs the merges separately on
// each run of newlines and each run of other characters (no Gemma 4 token mixes newlines with
// anything else, so this equals merging the whole text), and takes a run of newlines that is
// itself a token whole, as pith does (for Gemma 4's vocabulary merging gives the same token).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/bpe_merger.h"
#include "tokenizer/token_index.h"

namespace pith {

// "a b" → "a▁b": the text as the vocabulary spells it.
std::string escape_spaces(std::string_view text);

// Appends (offset, length) of each maximal run of '\n' and of each run between them (GGUF
// files, pre "gemma4"; a tokenizer.json vocabulary is merged over the whole text, as its BPE
// model does).
void split_newline_runs(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces);

// What encoding one piece needs: the vocabulary's index (stored text → id), its merges and the
// id of each byte's "<0xNN>" token (-1 when missing: that byte is dropped, as llama.cpp does).
struct MetaspaceBpe {
  const TokenIndex& index;
  const BpeMerger& merger;
  const std::array<int32_t, 256>& byte_tokens;

  // Appends the ids of one piece of escaped text (from split_newline_runs). Characters that
  // are not tokens (invalid UTF-8 bytes included) never merge and become byte tokens, so no
  // input byte is lost. `scratch` is reused between calls to avoid allocations; `naive` picks
  // the quadratic reference merge.
  void encode(std::string_view piece, bool naive, std::vector<int32_t>& out,
              std::vector<int32_t>& scratch) const;
};

}  // namespace pith
