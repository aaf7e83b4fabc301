// TokenIndex: text → token id hash map that can be queried with a string_view (no temporary
// std::string per lookup, which matters in the SentencePiece inner loop).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pith {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using TokenIndex = std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>>;

inline int32_t lookup(const TokenIndex& index, std::string_view text) {
  auto it = index.find(text);
  return it == index.end() ? -1 : it->second;
}

}  // namespace pith
