// SpecialTokenMatcher: finds special and added tokens written literally in text, so they
// become single ids instead of being split by the model. Control and unknown tokens (<s>,
// <|eot_id|>) are matched only when the caller asks (parse_special); user-defined (added)
// tokens always are, as in llama.cpp and Hugging Face. Matching is leftmost-longest. A token
// may swallow the ASCII whitespace of the text next to it (HF added tokens' lstrip/rstrip).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pith {

class SpecialTokenMatcher {
 public:
  // One piece of partitioned text: a literal token (id >= 0) or a run of plain text (id -1).
  struct Fragment {
    int32_t id;
    std::string_view text;
  };

  // Whitespace a matched token removes from the plain text around it.
  enum Strip : uint8_t { kNoStrip = 0, kStripLeft = 1, kStripRight = 2 };

  // Adds a token that may appear literally in text. `always` = matched even without
  // parse_special (user-defined tokens). `strip`: a combination of Strip bits.
  void add(int32_t id, std::string text, bool always, uint8_t strip = kNoStrip);

  // Splits `text` into plain-text fragments and token fragments, in order.
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  struct Entry {
    int32_t id;
    bool always;
    uint8_t strip;
    std::string text;
  };
  // Tokens bucketed by first byte, longest first.
  std::array<std::vector<Entry>, 256> by_first_{};
  bool any_always_ = false;
  bool any_ = false;
};

}  // namespace pith
