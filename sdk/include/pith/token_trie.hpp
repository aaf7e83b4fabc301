// pith/token_trie.hpp: the vocabulary as a byte trie laid out in preorder, so that a walk over
// every token that extends a prefix is a forward scan, and a dead prefix skips its whole
// subtree with one jump (end[node]). Grammar masking (pith/grammar_matcher.hpp) walks it once
// per grammar context instead of matching 128k tokens one by one: tokens sharing a prefix share
// the work of matching it. Header-only, std-only.
//
//   pith::TokenTrie trie(vocab_bytes, excluded);   // excluded[i]: never part of any walk
//   for (uint32_t n = 0; n < trie.nodes(); ++n) ...  // preorder: byte(n), depth(n), end(n)
#pragma once

#include <stdint.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pith {

class TokenTrie {
 public:
  TokenTrie() = default;
  // tokens[i] holds the bytes of token i. Empty tokens and those with excluded[i] set (special
  // or control tokens) are left out.
  // Takes the strings by value: move them in to keep one copy (1-3 MB for 128k tokens).
  explicit TokenTrie(std::vector<std::string> tokens, const std::vector<bool>& excluded = {})
      : tokens_(std::move(tokens)) {
    const std::vector<std::string>& toks = tokens_;
    const uint32_t n = static_cast<uint32_t>(toks.size());
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < n; ++i)
      if (!toks[i].empty() && !(i < excluded.size() && excluded[i])) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::string_view(toks[a]) < std::string_view(toks[b]);  // bytes compare unsigned
    });
    same_next_.assign(n, -1);
    usable_.assign(n, false);
    for (uint32_t id : order) usable_[id] = true;
    std::vector<uint32_t> path;  // nodes of the current prefix, path[d] at depth d + 1
    std::string_view prev;
    for (uint32_t id : order) {
      std::string_view s = toks[id];
      size_t lcp = 0;
      while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
      while (path.size() > lcp) {
        end_[path.back()] = static_cast<uint32_t>(byte_.size());
        path.pop_back();
      }
      for (size_t j = lcp; j < s.size(); ++j) {
        path.push_back(static_cast<uint32_t>(byte_.size()));
        byte_.push_back(static_cast<uint8_t>(s[j]));
        depth_.push_back(static_cast<uint16_t>(j + 1));
        end_.push_back(0);
        token_.push_back(-1);
      }
      int32_t& t = token_[path.back()];
      if (t < 0) {
        t = static_cast<int32_t>(id);
      } else {  // same bytes as an earlier token: chain it
        int32_t at = t;
        while (same_next_[static_cast<uint32_t>(at)] >= 0)
          at = same_next_[static_cast<uint32_t>(at)];
        same_next_[static_cast<uint32_t>(at)] = static_cast<int32_t>(id);
      }
      max_depth_ = std::max<size_t>(max_depth_, s.size());
      prev = s;
    }
    while (!path.empty()) {
      end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
  }

  // Token ids (mask bits), including excluded ones.
  uint32_t vocab_size() const { return static_cast<uint32_t>(tokens_.size()); }
  const std::string& bytes(uint32_t id) const { return tokens_[id]; }
  // In the trie: not empty, not excluded.
  bool usable(uint32_t id) const { return id < usable_.size() && usable_[id]; }
  uint32_t nodes() const { return static_cast<uint32_t>(byte_.size()); }
  size_t max_depth() const { return max_depth_; }
  uint8_t byte(uint32_t node) const { return byte_[node]; }
  uint16_t depth(uint32_t node) const { return depth_[node]; }
  // One past the last node of node's subtree: the next sibling (or an ancestor's sibling).
  uint32_t end(uint32_t node) const { return end_[node]; }
  // The token ending at node (-1 if none); further tokens with the same bytes via same_next.
  int32_t token(uint32_t node) const { return token_[node]; }
  int32_t same_next(uint32_t id) const { return same_next_[id]; }

  // The longest token that is a prefix of s (by bytes); -1 if none. Greedy tokenization of a
  // forced suffix: every byte has a token in byte-level vocabularies.
  int32_t longest_prefix(std::string_view s) const {
    int32_t best = -1;
    uint32_t lo = 0, hi = nodes();  // children of the current node lie in [lo, hi)
    for (size_t d = 0; d < s.size(); ++d) {
      uint32_t n = lo;
      while (n < hi && byte_[n] != static_cast<uint8_t>(s[d])) n = end_[n];
      if (n >= hi) break;
      if (token_[n] >= 0) best = token_[n];
      lo = n + 1;
      hi = end_[n];
    }
    return best;
  }

 private:
  std::vector<std::string> tokens_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<int32_t> token_;
  std::vector<int32_t> same_next_;
  std::vector<bool> usable_;
  size_t max_depth_ = 0;
};

// Special tokens of Llama-style vocabularies ("<|eot_id|>", "<|reserved_special_token_3|>"):
// their bytes are a name, not text, so grammars must never produce them. The ABI's vocabulary
// has no token types, hence this shape test.
inline bool looks_special(std::string_view b) {
  return b.size() >= 4 && b.substr(0, 2) == "<|" && b.substr(b.size() - 2) == "|>";
}

}  // namespace pith
