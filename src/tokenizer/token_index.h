// TokenIndex: text → token id map, queried with a string_view (no temporary std::string per
// lookup, which matters in the SentencePiece inner loop).
//
// Open addressing (linear probing, power-of-two size, load <= 1/2) over 16-byte slots that hold
// a 32-bit tag of the hash beside the id and the key's place in one character arena: a lookup
// reads one slot line and, when the tag matches, the key's bytes. Building a tokenizer looks up
// every merge's two halves and their join (3 x 151k-262k lookups for the 2026 vocabularies);
// with std::unordered_map's node chains that was 40 % of loading a vocabulary.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pith {

class TokenIndex {
 public:
  // Room for n keys without growing.
  void reserve(size_t n) {
    size_t want = 16;
    while (want < 2 * n) want *= 2;
    if (want > slots_.size()) rehash(want);
  }
  // text → id; an existing key takes the new id (`assign`) or keeps its own (`try_emplace`).
  void assign(std::string_view text, int32_t id) { put(text, id, true); }
  void try_emplace(std::string_view text, int32_t id) { put(text, id, false); }
  // The id of text, or -1.
  int32_t find(std::string_view text) const {
    if (slots_.empty()) return -1;
    const size_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag(h) && same(s, text)) return s.id;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;  // -1: empty
    uint32_t offset = 0, length = 0;
  };
  static size_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  static uint32_t tag(size_t h) { return static_cast<uint32_t>(uint64_t(h) >> 32); }
  bool same(const Slot& s, std::string_view text) const {
    return s.length == text.size() &&
           std::memcmp(arena_.data() + s.offset, text.data(), s.length) == 0;
  }
  void put(std::string_view text, int32_t id, bool overwrite) {
    if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const size_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {tag(h), id, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size())};
        arena_.append(text);
        ++count_;
        return;
      }
      if (s.tag == tag(h) && same(s, text)) {
        if (overwrite) s.id = id;
        return;
      }
    }
  }
  void rehash(size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      const size_t h = hash(std::string_view(arena_.data() + s.offset, s.length));
      size_t i = h & mask_;
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
  std::string arena_;  // every key's bytes, back to back
};

inline int32_t lookup(const TokenIndex& index, std::string_view text) {
  return index.find(text);
}

}  // namespace pith
