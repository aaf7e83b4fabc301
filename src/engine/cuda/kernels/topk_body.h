// Bodies of the LM-head reduction: softmax normaliser and top-K next-token distribution over
// logits [rows][vocab], without sorting the vocabulary.
//
// Phase 1 (grid chunks x rows, kTopKThreads each): a block stages one chunk of a row's logits
// in shared memory, writes the chunk's max and Σ exp(x - max), finds the chunk's k-th best
// logit by a radix select over order-preserving 32-bit keys (four 8-bit digit passes, a shared
// histogram each) and writes the chunk's k best (key > threshold, then the lowest ids among
// those equal to it) as candidates, in id order.
// Phase 2 (one block per row, kMergeThreads): combines the chunk statistics into the row's max
// and sum, runs the same radix select over the row's candidates (still in id order, so "first
// equal ones" are the lowest ids), bitonic-sorts the k survivors by (logit desc, id asc) and
// writes ids and probabilities exp(l - max) / sum.
//
// Ranking = token_distribution.h's: higher logit first, ties by lower id; k beyond the number
// of distinct values is fine (ties fill it by id). Work per row O(vocab) plus O(k log² k).
//
// Token masks: a masked row's disallowed tokens take the lowest key (0) in both selects, so
// every allowed token ranks above them, and sort to the end with key 0, where they are written
// as id -1. The softmax statistics still cover the whole vocabulary.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kTopKThreads = 256;    // phase 1 block
inline constexpr uint32_t kMergeThreads = 512;   // phase 2 block: half the largest sort
inline constexpr uint32_t kAdjustThreads = 128;  // logit adjustments: one block per row
inline constexpr uint32_t kTopKLimit = 1024;     // largest k
inline constexpr uint32_t kChunkMax = 8192;      // largest phase-1 chunk
inline constexpr uint32_t kRadixBins = 256;

// Vocabulary entries per phase-1 block. Larger k needs larger chunks for phase 1 to thin the
// candidates out; many rows allow larger chunks (fewer blocks, each block's fixed cost of
// syncs spread over more logits) while the grid still fills the GPU (~8 blocks per SM of a
// 132-SM H100); few rows want small chunks so that enough blocks run at all.
PITH_HD uint32_t topk_chunk(uint32_t rows, uint32_t vocab, uint32_t k_max) {
  uint32_t chunk = k_max > 512 ? 4096 : 2048;
  while (chunk < kChunkMax && size_t{rows} * ceil_div(vocab, chunk * 2) >= 132 * 8) chunk *= 2;
  return chunk;
}

// Where the phases meet in the workspace (all offsets in bytes from its start).
struct TopKWorkspace {
  uint32_t chunk = 0, n_chunks = 0, k_max = 0;
  size_t stats_at = 0;   // float2-like {max, sum} [rows][n_chunks]
  size_t logits_at = 0;  // float [rows][n_chunks * min(k_max, chunk)]
  size_t ids_at = 0;     // int32 same shape
  size_t bytes = 0;

  PITH_HD size_t row_candidates() const {
    return size_t{n_chunks} * (k_max < chunk ? k_max : chunk);
  }
};

// The layout of one call: chunk size from its rows, vocabulary and k_max.
PITH_HD TopKWorkspace topk_layout(uint32_t rows, uint32_t vocab, uint32_t k_max, uint32_t chunk) {
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  TopKWorkspace w;
  w.chunk = chunk;
  w.n_chunks = ceil_div(vocab, w.chunk);
  w.k_max = k_max;
  size_t cands = size_t{rows} * w.row_candidates();
  w.stats_at = 0;
  w.logits_at = align(size_t{rows} * w.n_chunks * 2 * sizeof(float));
  w.ids_at = w.logits_at + align(cands * sizeof(float));
  w.bytes = w.ids_at + align(cands * sizeof(int32_t));
  return w;
}

PITH_HD TopKWorkspace topk_workspace(uint32_t rows, uint32_t vocab, uint32_t k_max) {
  return topk_layout(rows, vocab, k_max, topk_chunk(rows, vocab, k_max));
}

// Bytes enough for every call with at most `rows` rows and k_max at most `k_max` (callers size
// the workspace once): the largest layout over every chunk size such a call can pick. Each
// layout grows with rows and k; 2048-entry chunks are only picked for k_max <= 512.
PITH_HD size_t topk_workspace_bound(uint32_t rows, uint32_t vocab, uint32_t k_max) {
  size_t bytes = 0;
  for (uint32_t chunk = 2048; chunk <= kChunkMax; chunk *= 2) {
    uint32_t k = chunk == 2048 && k_max > 512 ? 512 : k_max;
    size_t b = topk_layout(rows, vocab, k, chunk).bytes;
    bytes = b > bytes ? b : bytes;
  }
  return bytes;
}

// The rows' token masks (kernels.h softmax_topk): null `at`, or a word offset per row.
struct TokenMasks {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  const uint32_t* at = nullptr;
  const uint32_t* words = nullptr;

  // Row `row`'s mask, null when it has none.
  PITH_HD const uint32_t* of(uint32_t row) const {
    return at && at[row] != kNone ? words + at[row] : nullptr;
  }
  PITH_HD static bool allows(const uint32_t* mask, uint32_t id) {
    return !mask || ((mask[id >> 5] >> (id & 31)) & 1u);
  }
};

// One LogitAdjustment (forward_batch.h) as the device reads it: the same 16 bytes.
struct LogitAdjust {
  uint32_t token;
  float bias, repetition, penalty;
};

// The rows' logit adjustments (kernels.h adjust_logits): row r's are the at[2r + 1] entries
// starting at word at[2r] of `tail` (offsets from a fixed base, so a replayed graph finds a
// step's entries wherever the variable-length arrays before them ended).
struct LogitAdjusts {
  const uint32_t* at = nullptr;
  const uint32_t* tail = nullptr;
};

// Thread t of n_threads applies its share of row `row`'s adjustments to logits [rows][vocab]:
// l' = rep(l + bias) - penalty, the CPU engine's adjust_logit. Each token appears once per
// row, so no two threads write one logit.
PITH_HD void adjust_logits_body(uint32_t row, uint32_t t, uint32_t n_threads, float* logits,
                                uint32_t vocab, LogitAdjusts a) {
  const uint32_t n = a.at[2 * row + 1];
  const auto* e = reinterpret_cast<const LogitAdjust*>(a.tail + a.at[2 * row]);
  for (uint32_t i = t; i < n; i += n_threads) {
    float& l = logits[size_t{row} * vocab + e[i].token];
    float x = l + e[i].bias;
    if (e[i].repetition != 1.0f) x = x > 0 ? x / e[i].repetition : x * e[i].repetition;
    l = x - e[i].penalty;
  }
}

// How many a row keeps: its k (capped by k_max and the vocabulary).
PITH_HD uint32_t row_k(const uint32_t* ks, uint32_t row, uint32_t k_max, uint32_t n) {
  uint32_t k = ks[row] < k_max ? ks[row] : k_max;
  return k < n ? k : n;
}

// Shared state of the radix select; n_threads >= kRadixBins.
struct RadixShared {
  uint32_t hist[kRadixBins];
  uint32_t prefix;  // digits fixed so far: the threshold key once done
  uint32_t k_rem;   // rank still to find among keys matching the prefix: once done, how many
                    // keys equal to the threshold are taken
};

// Finds the k-th largest of keys key_at(0..len) (1 <= k <= len); scan[] is n_threads + 1 words
// of shared scratch. Afterwards sh.prefix = threshold, sh.k_rem = number of keys equal to it
// that belong to the top k.
template <class Block, class KeyAt>
PITH_HD void radix_select(const Block& blk, RadixShared& sh, uint32_t* scan, uint32_t len,
                          uint32_t k, KeyAt&& key_at) {
  uint32_t nt = blk.n_threads;
  blk.threads([&](uint32_t t) {
    if (t == 0) {
      sh.prefix = 0;
      sh.k_rem = k;
    }
  });
  blk.sync();
  uint32_t limit = ceil_div(len, nt) * nt;  // a uniform trip count for Block::count
  for (int shift = 24; shift >= 0; shift -= 8) {
    uint32_t prefix = sh.prefix, k_rem = sh.k_rem;
    uint32_t mask = shift == 24 ? 0u : ~0u << (shift + 8);
    blk.threads([&](uint32_t t) {
      for (uint32_t b = t; b < kRadixBins; b += nt) sh.hist[b] = 0;
    });
    blk.sync();
    blk.threads([&](uint32_t t) {
      for (uint32_t j = t; j < limit; j += nt) {
        uint32_t bin = kNoBin;
        if (j < len) {
          uint32_t key = key_at(j);
          if ((key & mask) == prefix) bin = (key >> shift) & (kRadixBins - 1);
        }
        blk.count(sh.hist, bin);
      }
    });
    blk.sync();
    // Counts of keys above each digit: an exclusive scan over the bins from the top one down.
    blk.threads([&](uint32_t t) { scan[t] = t < kRadixBins ? sh.hist[kRadixBins - 1 - t] : 0; });
    blk.exclusive_scan(scan);
    blk.threads([&](uint32_t t) {
      if (t >= kRadixBins) return;
      uint32_t digit = kRadixBins - 1 - t, above = scan[t];
      if (above < k_rem && k_rem <= above + sh.hist[digit]) {
        sh.prefix = prefix | (digit << shift);
        sh.k_rem = k_rem - above;
      }
    });
    blk.sync();
  }
}

// Walks keys 0..len in order and calls take(j, position) for the top-k ones (keys above the
// threshold, and the first sh.k_rem equal to it), positions 0..k in index order. Each thread
// takes a contiguous segment so one block scan orders the whole output. scan_a/scan_b are
// n_threads + 1 words each.
template <class Block, class KeyAt, class Take>
PITH_HD void take_selected(const Block& blk, const RadixShared& sh, uint32_t* scan_a,
                           uint32_t* scan_b, uint32_t len, KeyAt&& key_at, Take&& take) {
  uint32_t nt = blk.n_threads, seg = ceil_div(len, nt);
  uint32_t threshold = sh.prefix, n_equal = sh.k_rem;
  blk.threads([&](uint32_t t) {
    uint32_t above = 0, equal = 0;
    uint32_t end = (t + 1) * seg < len ? (t + 1) * seg : len;
    for (uint32_t j = t * seg; j < end; ++j) {
      uint32_t key = key_at(j);
      above += key > threshold;
      equal += key == threshold;
    }
    scan_a[t] = above;
    scan_b[t] = equal;
  });
  blk.exclusive_scan(scan_a);
  blk.exclusive_scan(scan_b);
  blk.threads([&](uint32_t t) {
    uint32_t equal_before = scan_b[t];
    uint32_t pos = scan_a[t] + (equal_before < n_equal ? equal_before : n_equal);
    uint32_t end = (t + 1) * seg < len ? (t + 1) * seg : len;
    for (uint32_t j = t * seg; j < end; ++j) {
      uint32_t key = key_at(j);
      if (key > threshold) {
        take(j, pos++);
      } else if (key == threshold) {
        if (equal_before < n_equal) take(j, pos++);
        ++equal_before;
      }
    }
  });
  blk.sync();
}

struct TopKChunkShared {
  // One pad word per 32 keeps both access patterns free of bank conflicts: strided (thread t
  // reads j = t + i * n_threads) and segmented (thread t reads its own contiguous run).
  float padded[kChunkMax + kChunkMax / kWarp];
  PITH_HD float& logit(uint32_t j) { return padded[j + j / kWarp]; }
  float partial[kTopKThreads];
  uint64_t best[kTopKThreads];  // a masked greedy row's best key per thread
  RadixShared radix;
  uint32_t scan_a[kTopKThreads + 1];
  uint32_t scan_b[kTopKThreads + 1];
};

// Phase 1: block (x = chunk, y = row).
template <class Block>
PITH_HD void topk_chunk_body(const Block& blk, TopKChunkShared& sh, const float* logits,
                             uint32_t vocab, const uint32_t* ks, TokenMasks masks, TopKWorkspace w,
                             unsigned char* workspace) {
  uint32_t chunk = blk.block_x, row = blk.block_y;
  uint32_t begin = chunk * w.chunk;
  uint32_t len = vocab - begin < w.chunk ? vocab - begin : w.chunk;
  const float* src = logits + size_t{row} * vocab + begin;
  blk.threads([&](uint32_t t) {
    float m = -INFINITY;
    for (uint32_t j = t; j < len; j += kTopKThreads) {
      float x = src[j];
      sh.logit(j) = x;
      m = x > m ? x : m;
    }
    sh.partial[t] = m;
  });
  blk.reduce_max(sh.partial);
  float max = sh.partial[0];
  blk.sync();  // everyone has read the max before partial[] is reused
  blk.threads([&](uint32_t t) {
    float s = 0;
    if (max != -INFINITY)
      for (uint32_t j = t; j < len; j += kTopKThreads) s += exp_f32(sh.logit(j) - max);
    sh.partial[t] = s;
  });
  blk.reduce_sum(sh.partial);
  float* stats =
      reinterpret_cast<float*>(workspace + w.stats_at) + (size_t{row} * w.n_chunks + chunk) * 2;
  blk.threads([&](uint32_t t) {
    if (t == 0) {
      stats[0] = max;
      stats[1] = sh.partial[0];
    }
  });

  uint32_t k = row_k(ks, row, w.k_max, len);
  if (k == 0) return;
  const uint32_t* mask = masks.of(row);
  auto key_at = [&](uint32_t j) {
    return TokenMasks::allows(mask, begin + j) ? order_key(sh.logit(j)) : 0u;
  };
  if (k == 1 && !mask) {  // greedy rows: the threshold is the max already found
    blk.threads([&](uint32_t t) {
      if (t == 0) {
        sh.radix.prefix = order_key(max);
        sh.radix.k_rem = 1;
      }
    });
    blk.sync();
  } else if (k == 1) {  // masked greedy rows: the best key (0 when nothing is allowed)
    blk.threads([&](uint32_t t) {
      uint64_t b = 0;
      for (uint32_t j = t; j < len; j += kTopKThreads) {
        uint64_t e = key_at(j);
        b = e > b ? e : b;
      }
      sh.best[t] = b;
    });
    blk.reduce_max(sh.best);
    blk.threads([&](uint32_t t) {
      if (t == 0) {
        sh.radix.prefix = static_cast<uint32_t>(sh.best[0]);
        sh.radix.k_rem = 1;
      }
    });
    blk.sync();
  } else {
    radix_select(blk, sh.radix, sh.scan_a, len, k, key_at);
  }
  // Row r's candidates: chunk c's at c * stride, stride = min(k_r, chunk), so a row's
  // candidate list is dense and in id order.
  size_t stride = row_k(ks, row, w.k_max, w.chunk);
  size_t at = size_t{row} * w.row_candidates() + chunk * stride;
  float* out_logits = reinterpret_cast<float*>(workspace + w.logits_at) + at;
  int32_t* out_ids = reinterpret_cast<int32_t*>(workspace + w.ids_at) + at;
  take_selected(blk, sh.radix, sh.scan_a, sh.scan_b, len, key_at, [&](uint32_t j, uint32_t p) {
    out_logits[p] = sh.logit(j);
    out_ids[p] = static_cast<int32_t>(begin + j);
  });
}

struct TopKMergeShared {
  uint64_t sort_keys[kTopKLimit];  // rank_key(logit, id): descending = the ranking
  float partial[kMergeThreads];
  RadixShared radix;
  uint32_t scan_a[kMergeThreads + 1];
  uint32_t scan_b[kMergeThreads + 1];
};

// Phase 2: block x = row. out_ids/out_probs [rows][k_max].
template <class Block>
PITH_HD void topk_merge_body(const Block& blk, TopKMergeShared& sh, uint32_t vocab,
                             const uint32_t* ks, TokenMasks masks, TopKWorkspace w,
                             const unsigned char* workspace, int32_t* out_ids, float* out_probs) {
  uint32_t row = blk.block_x, nt = blk.n_threads;
  const float* stats =
      reinterpret_cast<const float*>(workspace + w.stats_at) + size_t{row} * w.n_chunks * 2;
  blk.threads([&](uint32_t t) {
    float m = -INFINITY;
    for (uint32_t c = t; c < w.n_chunks; c += nt) m = stats[2 * c] > m ? stats[2 * c] : m;
    sh.partial[t] = m;
  });
  blk.reduce_max(sh.partial);
  float max = sh.partial[0];
  blk.sync();
  blk.threads([&](uint32_t t) {
    float s = 0;
    for (uint32_t c = t; c < w.n_chunks; c += nt)
      if (stats[2 * c] != -INFINITY) s += stats[2 * c + 1] * exp_f32(stats[2 * c] - max);
    sh.partial[t] = s;
  });
  blk.reduce_sum(sh.partial);
  float sum = sh.partial[0];

  uint32_t k = row_k(ks, row, w.k_max, vocab);
  if (k == 0) return;
  uint32_t stride = row_k(ks, row, w.k_max, w.chunk);
  uint32_t last_len = vocab - (w.n_chunks - 1) * w.chunk;
  uint32_t n_cand = (w.n_chunks - 1) * stride + (stride < last_len ? stride : last_len);
  size_t at = size_t{row} * w.row_candidates();
  const float* cand_logits = reinterpret_cast<const float*>(workspace + w.logits_at) + at;
  const int32_t* cand_ids = reinterpret_cast<const int32_t*>(workspace + w.ids_at) + at;
  const uint32_t* mask = masks.of(row);
  auto allowed = [&](uint32_t j) {
    return TokenMasks::allows(mask, static_cast<uint32_t>(cand_ids[j]));
  };
  auto key_at = [&](uint32_t j) { return allowed(j) ? order_key(cand_logits[j]) : 0u; };
  radix_select(blk, sh.radix, sh.scan_a, n_cand, k, key_at);
  take_selected(blk, sh.radix, sh.scan_a, sh.scan_b, n_cand, key_at, [&](uint32_t j, uint32_t p) {
    sh.sort_keys[p] = allowed(j) ? rank_key(cand_logits[j], static_cast<uint32_t>(cand_ids[j])) : 0;
  });

  // Bitonic sort, descending, of the k entries padded to a power of two with zeros (below
  // every real entry).
  uint32_t size = 1;
  while (size < k) size <<= 1;
  blk.threads([&](uint32_t t) {
    for (uint32_t i = k + t; i < size; i += nt) sh.sort_keys[i] = 0;
  });
  blk.sync();
  for (uint32_t run = 2; run <= size; run <<= 1) {
    for (uint32_t gap = run / 2; gap > 0; gap >>= 1) {
      blk.threads([&](uint32_t t) {
        for (uint32_t i = t; i < size / 2; i += nt) {
          uint32_t lo = 2 * gap * (i / gap) + i % gap, hi = lo + gap;
          bool descending = (lo & run) == 0;
          uint64_t a = sh.sort_keys[lo], b = sh.sort_keys[hi];
          if (descending ? a < b : a > b) {
            sh.sort_keys[lo] = b;
            sh.sort_keys[hi] = a;
          }
        }
      });
      blk.sync();
    }
  }
  blk.threads([&](uint32_t t) {
    for (uint32_t i = t; i < k; i += nt) {
      uint64_t e = sh.sort_keys[i];
      float logit = rank_value(e);
      out_ids[size_t{row} * w.k_max + i] = e == 0 ? -1 : static_cast<int32_t>(rank_id(e));
      out_probs[size_t{row} * w.k_max + i] = e == 0 ? 0.0f : exp_f32(logit - max) / sum;
    }
  });
}

}  // namespace pith::cuda::kern
