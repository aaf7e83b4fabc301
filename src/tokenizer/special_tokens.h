// SpecialTokenMatcher: finds special and added tokens written literally in text, so they
// become single ids instead of being split by the model. Control and unknown tokens (<s>,
// <|eot_id|>) are matched only when the caller asks (parse_special); user-defined (added)
// tokens always are, as in llama.cpp and Hugging Face. Matching is leftmost-longest.
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

  // Adds a token that may appear literally in text. `always` = matched even without
  // parse_special (user-defined tokens).
  void add(int32_t id, std::string text, bool always);

  // Splits `text` into plain-text fragments and token fragments, in order.
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  struct Entry {
    int32_t id;
    bool always;
    std::string text;
  };
  // Tokens bucketed by first byte, longest first.
  std::array<std::vector<Entry>, 256> by_first_{};
  bool any_always_ = false;
  bool any_ = false;
};

}  // namespace pith
