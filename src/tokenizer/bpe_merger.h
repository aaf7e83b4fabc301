// BpeMerger: the merge step of BPE over token ids. Given the initial symbols of one word
// (one token per byte for byte-level BPE), it repeatedly merges the adjacent pair with the
// lowest merge rank (leftmost first on ties) until no listed merge applies, as GPT-2's
// bpe() and Hugging Face's BPE model do.
//
// Cost: O(n log n) for an n-symbol word. Symbols form a doubly linked list over an array and
// candidate pairs sit in a binary heap; a merge re-examines only its two new neighbours, and
// stale heap entries are recognised by comparing the ids they were made from. (The naive
// algorithm rescans all pairs after each merge: O(n²), see encode_naive for the benchmark.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pith {

class BpeMerger {
 public:
  // Registers merge (left, right) → merged with priority `rank` (lower merges first). A pair
  // registered twice keeps its first (lowest) rank. Ids must be >= 0.
  void add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  // Room for n merges without growing (a vocabulary's merges are added in one go).
  void reserve(size_t n);
  size_t size() const { return count_; }

  // Merges `symbols` in place. Ids < 0 (bytes missing from the vocab) never merge.
  void merge(std::vector<int32_t>& symbols) const;

  // Same result, quadratic reference algorithm (rescan every pair after each merge). Used by
  // tests as the obviously correct oracle and by `pith bench tokenizer` as the baseline.
  void merge_naive(std::vector<int32_t>& symbols) const;

 private:
  // Open-addressing hash table (linear probing, power-of-two size, load <= 1/2): one cache
  // line per lookup, which is most of the cost of merging.
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  static size_t hash(uint64_t k) {  // murmur3 finalizer: every key bit reaches the low bits
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  const Slot* find(int32_t l, int32_t r) const {
    if (l < 0 || r < 0 || slots_.empty()) return nullptr;
    const uint64_t k = key(l, r);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return &s;
      if (s.key == kEmpty) return nullptr;
    }
  }
  void grow() { rehash(slots_.empty() ? 1024 : slots_.size() * 2); }
  void rehash(size_t n_slots);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace pith
