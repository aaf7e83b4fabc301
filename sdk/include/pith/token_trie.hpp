// pith/token_trie.hpp: the vocabulary as a byte trie laid out in preorder, so that a walk over
// every token that extends a prefix is a forward scan, and a dead prefix skips its whole
// subtree with one jump (end[node]). Grammar masking (pith/grammar_matcher.hpp) walks it once
// per grammar context instead of matching 128k tokens one by one: tokens sharing a prefix share
// the work of matching it. Header-only, std-only.
//
// The trie lives in one immutable block of 32-bit words (its "flat form"), shared by copies:
// a host builds it once per model and a guest receives it in one copy (pith_vocab_trie), so
// an inferlet never sorts and rebuilds 128k-262k tokens per request (tens of ms natively,
// seconds in an interpreter).
//
//   pith::TokenTrie trie(vocab_bytes, excluded);   // excluded[i]: never part of any walk
//   for (uint32_t n = 0; n < trie.nodes(); ++n) ...  // preorder: byte(n), depth(n), end(n)
#pragma once

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <memory>
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
  explicit TokenTrie(const std::vector<std::string>& tokens,
                     const std::vector<bool>& excluded = {}) {
    const std::vector<std::string>& toks = tokens;
    const uint32_t n = static_cast<uint32_t>(toks.size());
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < n; ++i)
      if (!toks[i].empty() && !(i < excluded.size() && excluded[i])) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::string_view(toks[a]) < std::string_view(toks[b]);  // bytes compare unsigned
    });
    std::vector<uint8_t> byte, usable(n, 0);
    std::vector<uint16_t> depth;
    std::vector<uint32_t> end;
    std::vector<int32_t> token, same_next(n, -1);
    for (uint32_t id : order) usable[id] = 1;
    size_t max_depth = 0;
    std::vector<uint32_t> path;  // nodes of the current prefix, path[d] at depth d + 1
    std::string_view prev;
    for (uint32_t id : order) {
      std::string_view s = toks[id];
      size_t lcp = 0;
      while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
      while (path.size() > lcp) {
        end[path.back()] = static_cast<uint32_t>(byte.size());
        path.pop_back();
      }
      for (size_t j = lcp; j < s.size(); ++j) {
        path.push_back(static_cast<uint32_t>(byte.size()));
        byte.push_back(static_cast<uint8_t>(s[j]));
        depth.push_back(static_cast<uint16_t>(j + 1));
        end.push_back(0);
        token.push_back(-1);
      }
      int32_t& t = token[path.back()];
      if (t < 0) {
        t = static_cast<int32_t>(id);
      } else {  // same bytes as an earlier token: chain it
        int32_t at = t;
        while (same_next[static_cast<uint32_t>(at)] >= 0) at = same_next[static_cast<uint32_t>(at)];
        same_next[static_cast<uint32_t>(at)] = static_cast<int32_t>(id);
      }
      max_depth = std::max<size_t>(max_depth, s.size());
      prev = s;
    }
    while (!path.empty()) {
      end[path.back()] = static_cast<uint32_t>(byte.size());
      path.pop_back();
    }
    size_t text_bytes = 0;
    for (const std::string& t : toks) text_bytes += t.size();
    const Layout l(n, static_cast<uint32_t>(byte.size()), text_bytes);
    std::shared_ptr<uint32_t[]> flat(new uint32_t[l.words]);
    uint32_t* w = flat.get();
    const uint32_t header[kHeaderWords] = {kMagic,
                                           kVersion,
                                           n,
                                           static_cast<uint32_t>(byte.size()),
                                           static_cast<uint32_t>(max_depth),
                                           static_cast<uint32_t>(text_bytes)};
    memcpy(w, header, sizeof header);
    memcpy(w + l.end, end.data(), end.size() * 4);
    memcpy(w + l.token, token.data(), token.size() * 4);
    memcpy(w + l.same_next, same_next.data(), same_next.size() * 4);
    memcpy(w + l.depth, depth.data(), depth.size() * 2);
    memcpy(w + l.byte, byte.data(), byte.size());
    memcpy(w + l.usable, usable.data(), usable.size());
    uint32_t* offsets = w + l.offsets;
    char* text = reinterpret_cast<char*>(w + l.text);
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; ++i) {
      offsets[i] = at;
      memcpy(text + at, toks[i].data(), toks[i].size());
      at += static_cast<uint32_t>(toks[i].size());
    }
    offsets[n] = at;
    bind(std::move(flat), l.words);
  }

  // The flat form (one block of 32-bit words; see Layout): what a host hands a guest in one
  // copy (abi.h pith_vocab_trie), so a guest never sorts and builds the trie itself.
  const uint32_t* flat_data() const { return flat_.get(); }
  size_t flat_words() const { return words_; }
  // A trie from its flat form; false (and *out untouched) if the words are not a whole trie of
  // this version. O(1): the sections' sizes are checked, not their contents.
  static bool from_flat(std::shared_ptr<uint32_t[]> words, size_t n_words, TokenTrie* out) {
    if (!words || n_words < kHeaderWords || words[0] != kMagic || words[1] != kVersion)
      return false;
    const Layout l(words[2], words[3], words[5]);
    if (l.words != n_words || words[l.offsets + words[2]] != words[5]) return false;
    out->bind(std::move(words), n_words);
    return true;
  }

  // Token ids (mask bits), including excluded ones.
  uint32_t vocab_size() const { return n_; }
  std::string_view bytes(uint32_t id) const {
    return std::string_view(text_ + offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  // In the trie: not empty, not excluded.
  bool usable(uint32_t id) const { return id < n_ && usable_[id] != 0; }
  uint32_t nodes() const { return m_; }
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
  static constexpr uint32_t kMagic = 0x49525450;  // "PTRI"
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kHeaderWords = 6;  // magic, version, n, m, max depth, text bytes

  // Word offsets of the sections for n tokens, m nodes and `text` bytes of token text:
  // end[m], token[m], same_next[n], offsets[n + 1] (into the text), depth[m] (uint16),
  // byte[m], usable[n] (bytes), the text; each section starts on a word.
  struct Layout {
    size_t end, token, same_next, offsets, depth, byte, usable, text, words;
    Layout(size_t n, size_t m, size_t text_bytes) {
      end = kHeaderWords;
      token = end + m;
      same_next = token + m;
      offsets = same_next + n;
      depth = offsets + n + 1;
      byte = depth + (m + 1) / 2;
      usable = byte + (m + 3) / 4;
      text = usable + (n + 3) / 4;
      words = text + (text_bytes + 3) / 4;
    }
  };

  void bind(std::shared_ptr<uint32_t[]> flat, size_t words) {
    const uint32_t* w = flat.get();
    const Layout l(w[2], w[3], w[5]);
    n_ = w[2];
    m_ = w[3];
    max_depth_ = w[4];
    end_ = w + l.end;
    token_ = reinterpret_cast<const int32_t*>(w + l.token);
    same_next_ = reinterpret_cast<const int32_t*>(w + l.same_next);
    offsets_ = w + l.offsets;
    depth_ = reinterpret_cast<const uint16_t*>(w + l.depth);
    byte_ = reinterpret_cast<const uint8_t*>(w + l.byte);
    usable_ = reinterpret_cast<const uint8_t*>(w + l.usable);
    text_ = reinterpret_cast<const char*>(w + l.text);
    flat_ = std::move(flat);  // immutable from here: copies of the trie share it
    words_ = words;
  }

  std::shared_ptr<uint32_t[]> flat_;
  size_t words_ = 0;
  uint32_t n_ = 0, m_ = 0;
  size_t max_depth_ = 0;
  const uint32_t* end_ = nullptr;
  const int32_t* token_ = nullptr;
  const int32_t* same_next_ = nullptr;
  const uint32_t* offsets_ = nullptr;
  const uint16_t* depth_ = nullptr;
  const uint8_t* byte_ = nullptr;
  const uint8_t* usable_ = nullptr;
  const char* text_ = nullptr;
};

// Special tokens of Llama-style vocabularies ("<|eot_id|>", "<|reserved_special_token_3|>"):
// their bytes are a name, not text, so grammars must never produce them. The ABI's vocabulary
// has no token types, hence this shape test.
inline bool looks_special(std::string_view b) {
  return b.size() >= 4 && b.substr(0, 2) == "<|" && b.substr(b.size() - 2) == "|>";
}

}  // namespace pith
