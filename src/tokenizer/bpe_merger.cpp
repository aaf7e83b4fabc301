// BPE merge loop (see bpe_merger.h).
#include "tokenizer/bpe_merger.h"

#include <algorithm>

namespace pith {

namespace {
constexpr int kShortWord = 12;
}  // namespace

void BpeMerger::add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  if (left < 0 || right < 0) return;
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t k = key(left, right);
  for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == k) return;  // keep the first (lowest) rank
    if (s.key == kEmpty) {
      s = {k, rank, merged};
      ++count_;
      return;
    }
  }
}

void BpeMerger::reserve(size_t n) {
  size_t want = 1024;
  while (want < 2 * n) want *= 2;
  if (want > slots_.size()) rehash(want);
}

void BpeMerger::rehash(size_t n_slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(n_slots, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    for (size_t i = hash(s.key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = s;
        break;
      }
    }
  }
}

void BpeMerger::merge(std::vector<int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  // Short words (most of them): the rescanning loop does fewer lookups and no allocation.
  if (n <= kShortWord) {
    merge_naive(symbols);
    return;
  }
  // Linked list over the symbol array; a merged-away symbol gets id INT32_MIN.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int left;
    int right;
    int32_t left_id;
    int32_t right_id;
  };
  // Min-heap on (rank, left): std heap functions build a max-heap, so invert the comparison.
  auto worse = [](const Cand& a, const Cand& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::vector<Cand> heap;
  heap.reserve(n);
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    if (const Slot* e = find(symbols[l], symbols[r])) {
      heap.push_back({e->rank, l, r, symbols[l], symbols[r]});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    Cand c = heap.back();
    heap.pop_back();
    // Stale if either side was merged since: ids only ever grow into longer tokens, so an
    // unchanged (left id, right id, adjacency) triple means the pair is still there.
    if (symbols[c.left] != c.left_id || symbols[c.right] != c.right_id || next[c.left] != c.right)
      continue;
    symbols[c.left] = find(c.left_id, c.right_id)->merged;
    symbols[c.right] = INT32_MIN;
    next[c.left] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  symbols.erase(std::remove(symbols.begin(), symbols.end(), INT32_MIN), symbols.end());
}

void BpeMerger::merge_naive(std::vector<int32_t>& symbols) const {
  while (symbols.size() >= 2) {
    int best = -1;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const Slot* e = find(symbols[i], symbols[i + 1]);
      if (e && e->rank < best_rank) best_rank = e->rank, best = static_cast<int>(i);
    }
    if (best < 0) return;
    symbols[best] = find(symbols[best], symbols[best + 1])->merged;
    symbols.erase(symbols.begin() + best + 1);
  }
}

}  // namespace pith
