// Literal special-token matching (see special_tokens.h).
#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace pith {

namespace {

// C-locale isspace, as llama.cpp strips: space, \t, \n, \v, \f, \r.
bool ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

}  // namespace

void SpecialTokenMatcher::add(int32_t id, std::string text, bool always, uint8_t strip) {
  if (text.empty()) return;
  auto& bucket = by_first_[static_cast<uint8_t>(text[0])];
  // Longest first, ties in the order added: insert after every entry at least as long (vocabs
  // with thousands of added tokens sharing a first byte, like DeepSeek's "[PAD...]", would
  // make a sort per insertion quadratic).
  auto at = std::upper_bound(bucket.begin(), bucket.end(), text.size(),
                             [](size_t len, const Entry& e) { return len > e.text.size(); });
  bucket.insert(at, {id, always, strip, std::move(text)});
  any_ = true;
  any_always_ |= always;
}

void SpecialTokenMatcher::partition(std::string_view text, bool parse_special,
                                    std::vector<Fragment>& out) const {
  if (text.empty()) return;
  if (!(parse_special ? any_ : any_always_)) {
    out.push_back({-1, text});
    return;
  }
  size_t plain_start = 0;
  for (size_t i = 0; i < text.size();) {
    const Entry* hit = nullptr;
    for (const Entry& e : by_first_[static_cast<uint8_t>(text[i])]) {
      if ((e.always || parse_special) && text.compare(i, e.text.size(), e.text) == 0) {
        hit = &e;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t plain_end = i;
    if (hit->strip & kStripLeft)
      while (plain_end > plain_start && ascii_space(text[plain_end - 1])) --plain_end;
    if (plain_end > plain_start)
      out.push_back({-1, text.substr(plain_start, plain_end - plain_start)});
    out.push_back({hit->id, text.substr(i, hit->text.size())});
    i += hit->text.size();
    if (hit->strip & kStripRight)
      while (i < text.size() && ascii_space(text[i])) ++i;
    plain_start = i;
  }
  if (plain_start < text.size()) out.push_back({-1, text.substr(plain_start)});
}

}  // namespace pith
