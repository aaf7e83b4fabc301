// The LM head for top-K outputs, fused with the softmax normaliser and top-K selection.
//
// Unfused, R output rows would write an [R][vocab] logit matrix (R x 128k floats = 50 MB at
// R = 100 for Llama 3) and read it back for the max, exp-sum and top-K passes: at small d_model
// that traffic, not the multiply, dominates a batched decode step. Here the vocabulary is cut
// into fixed blocks (matmul_blocks); each block's logits are reduced while still in cache into
// a SoftmaxPartial per (row, block) and a per-worker TopKSelector per row, merged at the end.
// The logits are bit-identical to matmul's; probabilities combine the block partials in block
// order, so results do not depend on thread scheduling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "engine/kernels/matmul.h"
#include "engine/token_distribution.h"

namespace pith {

struct LmHeadScratch {
  std::vector<SoftmaxPartial> partials;   // [R][n_blocks]
  std::vector<TopKSelector> selectors;    // [worker][R]
  std::vector<std::vector<float>> block;  // [worker] one block's soft-capped/adjusted logits
};

// out[r] = top-min(ks[r], vocab) distribution of softmax(W h[r]) for r < n_rows; h is
// [n_rows][w.cols] (already normed), ks[r] >= 1. softcap > 0 caps every logit first:
// softcap * tanh(logit / softcap) (gemma2's final_logit_softcapping). allowed (null, or one
// entry per row, null for a row without one): the row's TokenMask, which only its top-K obeys.
// adjust (the same way): the row's LogitAdjustments, applied after the cap to the logits both
// the top-K and the softmax see.
void lm_head_top_k(ThreadPool& pool, const WeightMatrix& w, const float* h, size_t n_rows,
                   const uint32_t* ks, LmHeadScratch& scratch, TokenDistribution* out,
                   float softcap = 0, const uint64_t* const* allowed = nullptr,
                   const LogitAdjustments* const* adjust = nullptr);

// In place: x[i] = softcap * tanh(x[i] / softcap).
void soft_cap(float* x, size_t n, float softcap);

}  // namespace pith
