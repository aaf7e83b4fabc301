// Literal special-token matching (see special_tokens.h).
#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace pith {

void SpecialTokenMatcher::add(int32_t id, std::string text, bool always) {
  if (text.empty()) return;
  auto& bucket = by_first_[static_cast<uint8_t>(text[0])];
  bucket.push_back({id, always, std::move(text)});
  std::stable_sort(bucket.begin(), bucket.end(),
                   [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
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
    if (i > plain_start) out.push_back({-1, text.substr(plain_start, i - plain_start)});
    out.push_back({hit->id, text.substr(i, hit->text.size())});
    i += hit->text.size();
    plain_start = i;
  }
  if (plain_start < text.size()) out.push_back({-1, text.substr(plain_start)});
}

}  // namespace pith
