// Bodies of the mixture-of-experts FFN kernels (qwen2moe, qwen3moe, qwen35moe; the CPU's
// engine/moe_ffn.h), routed on the device so a step needs no host round trip:
//   1. moe_route: per token (a block), softmax over the router logits, the n_used most probable
//      experts (ties: the lower index, as the CPU's partial_sort), their weights renormalised
//      where the family does and scaled by the per-expert scale where it has one;
//   2. moe_sort: the routed (token, choice) pairs grouped by expert, tokens in order within an
//      expert (offsets[E+1], the token of each slot, the slot of each choice; a block per
//      expert ranks its choices with scans);
//   3. moe_expert_gemm: y[slot] = W_e x[slot] for every expert's slots in one launch (a block per
//      expert and 64 output rows; blocks of experts without tokens return at once), x gathered
//      from the tokens' rows or read in slot order; with BF16 weights and at most 8 tokens in
//      the step (so at most 8 slots an expert: decode) the GEMV of gemv_body.h instead, blocks
//      of 8 output rows for each slot of which only the expert's first slot's do the work (a
//      grid over the T K slots, not over all E experts: most of those have no token); with
//      BF16 weights and more tokens, the tensor-core form of moe_mma_body.h (these CUDA-core
//      tiles then serve F32 weights and are the tests' reference);
//   4. moe_combine: out[t] = sum_k w[t][k] y[slot of (t, k)], in the choices' order; the shared
//      expert, where present, then adds sigmoid(g[t]) ysh[t] (moe_add_gated).
// Between the gate/up GEMM and the down GEMM the family's gated activation (swiglu_body) runs
// over all slots at once: the slots of all experts are contiguous.
#pragma once

#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/gemv_body.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kMoeThreads = 256;
inline constexpr uint32_t kMoeMaxUsed = 16;  // experts per token (qwen3: 8)
inline constexpr uint32_t kMoeRows = 64;     // output rows per block of the expert GEMM
inline constexpr uint32_t kMoeSlots = 16;    // slots per pass
inline constexpr uint32_t kMoeK = 32;        // inner-dimension tile

// Threads of a route block: one block per token, the experts spread over its threads.
inline constexpr uint32_t kMoeRouteThreads = 128;

struct MoeRouteShared {
  float part[kMoeRouteThreads];  // per thread, then the reduction's result in [0]
  uint64_t keys[kMoeRouteThreads];
};

// Block x = token t: probs of logits[t] (softmax in place), then experts[t][k] and weights[t][k]
// for k < K. Each top-K round takes the largest rank_key (ties: the lower expert, as the CPU's
// partial_sort over (-prob, expert)) below the last round's, a block reduction over E / threads
// experts a thread (E x K comparisons in all, spread over the block). Every key is nonzero and
// distinct, so each round finds one (NaN probabilities rank last).
// expert_scale may be null.
template <class Block>
PITH_HD void moe_route_block(const Block& blk, MoeRouteShared& sh, float* logits, uint32_t E,
                             uint32_t K, bool norm_top_k, const float* expert_scale,
                             uint32_t* experts, float* weights) {
  const size_t tok = blk.block_x;
  const uint32_t nt = blk.n_threads;
  float* p = logits + tok * E;
  blk.threads([&](uint32_t t) {
    float m = -INFINITY;
    for (uint32_t e = t; e < E; e += nt) m = p[e] > m ? p[e] : m;
    sh.part[t] = m;
  });
  blk.reduce_max(sh.part);
  const float mx = sh.part[0];
  blk.sync();  // everyone has read the max before part[] is reused
  blk.threads([&](uint32_t t) {
    float sum = 0;
    for (uint32_t e = t; e < E; e += nt) {
      p[e] = exp_f32(p[e] - mx);
      sum += p[e];
    }
    sh.part[t] = sum;
  });
  blk.reduce_sum(sh.part);
  const float inv = 1.0f / sh.part[0];
  // Each thread normalises and ranks the experts it exponentiated: no barrier needed between.
  uint32_t pick[kMoeMaxUsed];
  float w[kMoeMaxUsed], total = 0;
  uint64_t last = ~uint64_t{0};
  for (uint32_t k = 0; k < K; ++k) {
    blk.threads([&](uint32_t t) {
      uint64_t best = 0;
      for (uint32_t e = t; e < E; e += nt) {
        if (k == 0) p[e] *= inv;
        const uint64_t key = rank_key(p[e], e);
        if (key < last && key > best) best = key;
      }
      sh.keys[t] = best;
    });
    blk.reduce_max(sh.keys);
    last = sh.keys[0];
    blk.sync();  // everyone has read the winner before keys[] is reused
    pick[k] = rank_id(last);
    w[k] = rank_value(last);
    total += w[k];
  }
  const float norm = norm_top_k && total > 0 ? 1.0f / total : 1.0f;
  blk.threads([&](uint32_t t) {
    if (t != 0) return;
    for (uint32_t k = 0; k < K; ++k) {
      experts[tok * K + k] = pick[k];
      weights[tok * K + k] = w[k] * norm * (expert_scale ? expert_scale[pick[k]] : 1.0f);
    }
  });
}

// The routed (token, choice) pairs grouped by expert: offsets [E + 1], slot_token [T * K] (the
// token of each slot), slot_of [T * K] (the slot of token t's choice k). One block per expert e
// (grid E, kMoeThreads threads) reads all T K choices twice: first counting those of lower
// experts (e's first slot), then, kMoeThreads choices at a time in (token, k) order, ranking its
// own with an exclusive scan, so the slots come out in the CPU's order (by expert, tokens
// ascending) with no atomics and no serial pass.
struct MoeSortShared {
  uint32_t flags[kMoeThreads + 1];  // per thread, then the scan's output and total
  uint32_t first;                   // e's first slot
  uint32_t placed;                  // e's choices ranked so far
};

template <class Block>
PITH_HD void moe_sort_body(const Block& blk, MoeSortShared& sh, const uint32_t* experts, uint32_t T,
                           uint32_t E, uint32_t K, uint32_t* offsets, uint32_t* slot_token,
                           uint32_t* slot_of) {
  const uint32_t e = blk.block_x, n = T * K, nt = blk.n_threads;
  blk.threads([&](uint32_t t) { sh.flags[t] = 0; });
  for (uint32_t base = 0; base < n; base += nt)
    blk.threads([&](uint32_t t) {
      if (base + t < n && experts[base + t] < e) ++sh.flags[t];
    });
  blk.sync();
  blk.exclusive_scan(sh.flags);
  blk.threads([&](uint32_t t) {
    if (t == 0) {
      sh.first = sh.flags[nt];
      sh.placed = 0;
    }
  });
  blk.sync();
  for (uint32_t base = 0; base < n; base += nt) {
    blk.threads([&](uint32_t t) { sh.flags[t] = base + t < n && experts[base + t] == e; });
    blk.sync();
    blk.exclusive_scan(sh.flags);
    blk.threads([&](uint32_t t) {
      const uint32_t i = base + t;
      if (i < n && experts[i] == e) {
        const uint32_t slot = sh.first + sh.placed + sh.flags[t];
        slot_token[slot] = i / K;
        slot_of[i] = slot;
      }
    });
    blk.sync();
    blk.threads([&](uint32_t t) {
      if (t == 0) sh.placed += sh.flags[nt];
    });
    blk.sync();
  }
  blk.threads([&](uint32_t t) {
    if (t == 0) {
      offsets[e] = sh.first;
      if (e + 1 == E) offsets[E] = sh.first + sh.placed;
    }
  });
}

struct MoeGemmShared {
  float w[kMoeRows][kMoeK + 1];
  float x[kMoeSlots][kMoeK + 1];
  float acc[kMoeSlots][kMoeRows];
};

// Block (bx = expert, by = tile of kMoeRows output rows), kMoeThreads threads:
// y[s][r] = sum_c W_e[r][c] x(s)[c] for the expert's slots s in [offsets[e], offsets[e+1]),
// where W_e = w + e * rows * cols ([rows][cols]) and x(s) = x + (gather ? slot_token[s] : s) *
// ld_x; y rows ld_y apart, in Out.
template <class W, class X, class Out, class ForThreads>
PITH_HD void moe_expert_gemm_block(uint32_t bx, uint32_t by, const W* w, uint32_t rows,
                                   uint32_t cols, const X* x, size_t ld_x,
                                   const uint32_t* slot_token, bool gather, const uint32_t* offsets,
                                   Out* y, size_t ld_y, MoeGemmShared& sh,
                                   ForThreads&& for_threads) {
  const uint32_t s_begin = offsets[bx], s_end = offsets[bx + 1], r0 = by * kMoeRows;
  if (s_begin == s_end || r0 >= rows) return;  // uniform over the block
  const uint32_t n_rows = rows - r0 < kMoeRows ? rows - r0 : kMoeRows;
  const W* we = w + (size_t{bx} * rows + r0) * cols;
  for (uint32_t s0 = s_begin; s0 < s_end; s0 += kMoeSlots) {
    const uint32_t n_slots = s_end - s0 < kMoeSlots ? s_end - s0 : kMoeSlots;
    for_threads([&](uint32_t tid) {
      for (uint32_t i = tid; i < kMoeSlots * kMoeRows; i += kMoeThreads)
        sh.acc[i / kMoeRows][i % kMoeRows] = 0.0f;
    });
    for (uint32_t k0 = 0; k0 < cols; k0 += kMoeK) {
      const uint32_t n_k = cols - k0 < kMoeK ? cols - k0 : kMoeK;
      for_threads([&](uint32_t tid) {  // the tiles, each row's k run read in order
        for (uint32_t i = tid; i < n_rows * n_k; i += kMoeThreads) {
          const uint32_t r = i / n_k, c = i % n_k;
          sh.w[r][c] = to_f32(we[size_t{r} * cols + k0 + c]);
        }
        for (uint32_t i = tid; i < n_slots * n_k; i += kMoeThreads) {
          const uint32_t s = i / n_k, c = i % n_k;
          const uint32_t src = gather ? slot_token[s0 + s] : s0 + s;
          sh.x[s][c] = to_f32(x[size_t{src} * ld_x + k0 + c]);
        }
      });
      for_threads([&](uint32_t tid) {  // thread (row, slots tid / kMoeRows + 4 j)
        const uint32_t r = tid % kMoeRows;
        if (r >= n_rows) return;
        for (uint32_t s = tid / kMoeRows; s < n_slots; s += kMoeThreads / kMoeRows) {
          float a = sh.acc[s][r];
          for (uint32_t c = 0; c < n_k; ++c) a += sh.w[r][c] * sh.x[s][c];
          sh.acc[s][r] = a;
        }
      });
    }
    for_threads([&](uint32_t tid) {
      for (uint32_t i = tid; i < n_slots * n_rows; i += kMoeThreads) {
        const uint32_t s = i / n_rows, r = i % n_rows;
        store_f32(y + size_t{s0 + s} * ld_y + r0 + r, sh.acc[s][r]);
      }
    });
  }
}

// The decode form of moe_expert_gemm_block (BF16 weights and inputs): block (x, y = slot j)
// finds the expert e whose slots hold j (the last e with offsets[e] <= j: a binary search over
// the E + 1 offsets) and, if j is e's first slot, computes output rows [8x, 8x + 8) of W_e for
// all of e's slots, which must number at most kGemvMaxN (the launcher's contract: at most that
// many tokens). x rows as there (16-byte aligned: ld_x a multiple of 8).
template <class Block, class Out>
PITH_HD void moe_expert_gemv_block(const Block& blk, GemvShared& sh, const Bf16* w, uint32_t E,
                                   uint32_t rows, uint32_t cols, const Bf16* x, size_t ld_x,
                                   const uint32_t* slot_token, bool gather, const uint32_t* offsets,
                                   Out* y, size_t ld_y) {
  const uint32_t j = blk.block_y;
  const uint32_t e = last_at_most(offsets, E, j), s0 = offsets[e], n = offsets[e + 1] - s0;
  const uint32_t first_row = blk.block_x * kGemvRowsPerBlock;
  if (j != s0 || n == 0 || n > kGemvMaxN || first_row >= rows) return;  // uniform over the block
  gemv_rows_block<kGemvMaxN>(
      blk, sh, w + size_t{e} * rows * cols, rows, cols, first_row, n,
      [&](uint32_t r) { return x + size_t{gather ? slot_token[s0 + r] : s0 + r} * ld_x; },
      [&](uint32_t r) { return y + size_t{s0 + r} * ld_y; });
}

// out[t][c] = sum_k weights[t][k] * y[slot_of[t][k]][c] over [T][d] (F32).
PITH_HD void moe_combine_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* y,
                              const uint32_t* slot_of, const float* weights, uint32_t T, uint32_t K,
                              uint32_t d, float* out) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{T} * d, [&](size_t i) {
    const size_t tok = i / d, c = i % d;
    float acc = 0;
    for (uint32_t k = 0; k < K; ++k)
      acc += weights[tok * K + k] * y[size_t{slot_of[tok * K + k]} * d + c];
    out[i] = acc;
  });
}

// out[t][c] += sigmoid(g[t]) * ysh[t][c] over [T][d] (F32): the shared expert's gated output.
PITH_HD void moe_add_gated_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* ysh,
                                const float* g, uint32_t T, uint32_t d, float* out) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{T} * d,
              [&](size_t i) { out[i] += ysh[i] / (1.0f + exp_f32(-g[i / d])); });
}

}  // namespace pith::cuda::kern
