// pith/ngram_drafter.hpp: prompt lookup decoding's drafter (Saxena 2023): the draft is what
// followed the most recent earlier occurrence of the context's last n-gram. Needs no draft
// model; it pays off wherever output repeats its input or itself (code edits, extraction,
// summaries quoting the source, degenerate loops). Verification is the caller's: one forward
// over [last token, draft...] with a distribution per position (Context::decode_all).
#pragma once

#include <stdint.h>

#include <vector>

namespace pith {

struct NgramDrafter {
  uint32_t max_ngram = 3;  // tried first: longer matches predict better
  uint32_t min_ngram = 1;
  uint32_t max_draft = 8;

  // Up to max_draft tokens; empty when no n-gram of the tail occurred before. The most recent
  // occurrence followed by a full draft wins; failing that, the earliest one (the longest
  // continuation: in a run like "x x x x" the latest match would draft one token).
  std::vector<uint32_t> draft(const std::vector<uint32_t>& tokens) const {
    const size_t len = tokens.size();
    for (uint32_t n = max_ngram; n >= min_ngram && n > 0; --n) {
      if (len < size_t{n} + 1) continue;
      const uint32_t* tail = tokens.data() + len - n;
      size_t found = len;
      for (size_t i = len - n; i-- > 0;) {
        bool same = true;
        for (uint32_t j = 0; j < n && same; ++j) same = tokens[i + j] == tail[j];
        if (!same) continue;
        found = i;
        if (len - (i + n) >= max_draft) break;
      }
      if (found == len) continue;
      const size_t from = found + n, to = from + max_draft < len ? from + max_draft : len;
      return std::vector<uint32_t>(tokens.begin() + long(from), tokens.begin() + long(to));
    }
    return {};
  }
};

}  // namespace pith
