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
#include <unordered_map>
#include <vector>

namespace pith {

class BpeMerger {
 public:
  // Registers merge (left, right) → merged with priority `rank` (lower merges first). A pair
  // registered twice keeps its first (lowest) rank.
  void add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  size_t size() const { return table_.size(); }

  // Merges `symbols` in place. Ids < 0 (bytes missing from the vocab) never merge.
  void merge(std::vector<int32_t>& symbols) const;

  // Same result, quadratic reference algorithm (rescan every pair after each merge). Used by
  // tests as the obviously correct oracle and by `pith bench tokenizer` as the baseline.
  void merge_naive(std::vector<int32_t>& symbols) const;

 private:
  struct Entry {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t key(int32_t l, int32_t r) {
    return (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
  }
  const Entry* find(int32_t l, int32_t r) const {
    if (l < 0 || r < 0) return nullptr;
    auto it = table_.find(key(l, r));
    return it == table_.end() ? nullptr : &it->second;
  }
  std::unordered_map<uint64_t, Entry> table_;
};

}  // namespace pith
