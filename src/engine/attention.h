// Softmax attention of a batch's queries over paged KV (one layer), per sequence and head.
//
// Each sequence's queries attend to the slots of its own context, read through its page table
// (physical ids in any order), restricted by its mask: causal by default, or run-length
// visible/hidden runs per input (forward_batch.h). The K/V of the inputs themselves must
// already be written to their slots. GQA: query head h reads KV head h / (n_heads/n_kv_heads).
//
// Work is split into tasks of (sequence, query heads, chunk of up to 16 queries) on the thread
// pool, so both one long prefill and many single-token decodes spread over all cores. A task
// takes the whole GQA group of query heads that share one KV head when there are enough tasks
// to keep the workers busy (each K/V row is then loaded once for the group), single heads
// otherwise. Per query: one pass of dot products over the visible K rows (contiguous
// [page_size][head_dim] tiles, one kernel call per page piece), softmax with scale
// 1/sqrt(head_dim) or the family's (max-subtracted, vectorised exp; soft-capped first where
// the family caps), one pass of weighted V rows. A sliding window clips the visible slots to
// the most recent `window` by slot index, which for a plain sequence is its position.
// In a causal chunk without a window, the slots every query of the chunk sees (up to the
// first query's own) are scored and summed for all of the task's (query, head) rows in one
// pass per page piece, so a prefill reads each K/V piece from L1 once per chunk rather than
// from L2 once per query. With AVX-512 (head_dim a multiple of 16, 16+ rows) those pieces take
// kernels for many rows: K transposed per 16 keys so each FMA gives 16 scores, and V rows
// shared by 4 rows' accumulators (1B shape, 512-token prefill on Zen 4: attention 350 → 210 ms).
// The inner loops over one page piece live in attention_kernels.h; they read K/V as the pool
// stores them (f32, f16 or bf16) and widen to f32 as they go, so a 16-bit pool halves the bytes
// a long context streams (1B shape, batch-32 decode at 1 024 tokens: 112-117 -> 71-74 ms).
// Cost O(visible_slots * head_dim) per (query, head); memory traffic O(visible_slots *
// head_dim) per (query, task).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "engine/kv_pool.h"

namespace pith {

struct AttentionSequence {
  const float* q = nullptr;  // [n_inputs][n_heads * head_dim], RoPE applied
  float* out = nullptr;      // [n_inputs][n_heads * head_dim]
  uint32_t n_inputs = 0;
  uint32_t context_len = 0;         // inputs occupy slots [context_len - n_inputs, context_len)
  std::span<const uint32_t> pages;  // page table, context order
  const std::vector<std::vector<uint32_t>>* mask = nullptr;  // null or empty: causal
};

// Reusable buffers (per-worker score rows, the task list), so a forward allocates nothing once
// warmed up.
struct AttentionScratch {
  struct Task {
    uint32_t seq, head, q_begin, q_end;
  };
  std::vector<Task> tasks;
  std::vector<std::vector<float>> scores;  // [worker][heads per task][max context_len]
  std::vector<std::vector<float>> acc;     // [worker][heads per task][head_dim]
};

// The per-layer options of the model family (ModelConfig).
struct AttentionParams {
  float scale = 0;      // query scale; 0: 1/sqrt(head_dim)
  float softcap = 0;    // scores -> softcap * tanh(scores / softcap); 0: off
  uint32_t window = 0;  // a query sees only the `window` most recent slots (itself included)
                        // among those its mask allows; 0: no window
  // [n_heads] sink logits (gpt-oss): head h's softmax denominator also sums exp(sinks[h]),
  // a slot with no value, so its weights sum to less than 1. null: none.
  const float* sinks = nullptr;
};

// Fills every sequence's `out` for one layer. Inputs are assumed validated (page ids in range,
// masks summing to context_len, every query seeing at least one slot).
void attention(ThreadPool& pool, const KvPool& kv, uint32_t layer, uint32_t n_heads,
               std::span<const AttentionSequence> seqs, AttentionScratch& scratch,
               const AttentionParams& params = {});

}  // namespace pith
