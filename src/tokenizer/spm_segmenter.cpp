// SentencePiece BPE segmentation (see spm_segmenter.h).
#include "tokenizer/spm_segmenter.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace pith {

void SpmSegmenter::encode(std::string_view text, std::vector<int32_t>& out) const {
  struct Sym {
    uint32_t start;
    uint32_t len;  // 0 once merged into its left neighbour
    int prev;
    int next;
  };
  std::vector<Sym> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    // One symbol per character. llama.cpp trusts the lead byte's length even when the bytes
    // are not valid UTF-8 (and so can swallow part of a following "▁"); taking invalid bytes
    // one by one gives the same result on valid text and keeps invalid text lossless.
    size_t n = utf8::valid_sequence_at(text, off);
    if (n == 0) n = 1;
    int i = static_cast<int>(sym.size());
    sym.push_back({uint32_t(off), uint32_t(n), i - 1, off + n < text.size() ? i + 1 : -1});
    off += n;
  }
  struct Cand {
    float score;
    int left;
    int right;
    uint32_t len;  // combined length when queued; a mismatch later means stale
  };
  // Max-heap on score, then the smaller left index.
  auto lower = [](const Cand& a, const Cand& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::vector<Cand> heap;
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    uint32_t len = sym[l].len + sym[r].len;
    int32_t id = lookup(index_, text.substr(sym[l].start, len));
    if (id < 0) return;
    heap.push_back({scores_.empty() ? 0.0f : scores_[id], l, r, len});
    std::push_heap(heap.begin(), heap.end(), lower);
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) consider(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    Cand c = heap.back();
    heap.pop_back();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
    std::string_view piece = text.substr(sym[i].start, sym[i].len);
    int32_t id = lookup(index_, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      int32_t b = byte_tokens_[static_cast<uint8_t>(c)];
      if (b < 0) b = unk_id_;
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace pith
