// From logits to what inferlets read: log-sum-exp and the top-K next-token distribution
// (ids sorted by probability, descending, ties by lower id; probabilities are the softmax over
// the full vocabulary, so they need not sum to 1 over the K entries).
//
// Two ways in: `top_k_distribution` over one materialised logit row, or the streaming pieces
// (TopKSelector + SoftmaxPartial) that the fused LM head (lm_head.h) feeds block by block while
// each block of logits is still in cache, so an [R][vocab] logit matrix is never written.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/forward_batch.h"

namespace pith {

// log(sum(exp(logits))) over n entries: max-subtracted, vectorised exp (~2 ulp), partial sums
// flushed to double every 1024 entries. Cost O(n), ~0.1 ms for a 128k vocabulary.
double logsumexp(const float* logits, size_t n);

// The min(k, n) most likely tokens. Cost O(n + k log k) for the usual case where few logits
// beat the running K-th best (a vectorised threshold scan), O(n log k) at worst. With `allowed`
// (a TokenMask of n bits), the min(k, allowed) most likely allowed tokens; probabilities are
// still over all n. With `adjust`, the distribution of the adjusted logits (OutputSpec::adjust).
TokenDistribution top_k_distribution(const float* logits, size_t n, uint32_t k,
                                     const uint64_t* allowed = nullptr,
                                     const LogitAdjustments* adjust = nullptr);

// Softmax normaliser of one block of logits: sum = Σ exp(x - max). Blocks combine exactly in
// any grouping; `combine_logsumexp` folds a sequence of them in the order given (so a fixed
// block order gives a fixed result, whatever thread computed each block).
struct SoftmaxPartial {
  float max = -INFINITY;
  double sum = 0;
};
SoftmaxPartial softmax_partial(const float* logits, size_t n);
double combine_logsumexp(const SoftmaxPartial* parts, size_t n_parts);

// Keeps the k best (logit, id) pairs offered, in any order of arrival: a min-heap on the
// ranking (higher logit first, ties by lower id) whose worst entry is the threshold a
// vectorised scan compares whole 8-lane groups against, so almost every logit costs one
// compare once the heap is full. The result does not depend on the order of offers.
class TopKSelector {
 public:
  struct Entry {
    float logit;
    int32_t id;
  };

  explicit TopKSelector(uint32_t k = 0) { reset(k); }
  void reset(uint32_t k);

  // Offers logits[i] as token first_id + i.
  void scan(const float* logits, size_t n, int32_t first_id);
  // The same for the tokens `allowed` (a TokenMask over the whole vocabulary) lets through.
  void scan_allowed(const float* logits, size_t n, int32_t first_id, const uint64_t* allowed);
  void merge(const TopKSelector& other);
  // The kept entries, best first.
  std::vector<Entry> sorted() const;
  // Sorted ids with probabilities exp(logit - lse).
  TokenDistribution distribution(double lse) const;

 private:
  void offer(float logit, int32_t id);

  uint32_t k_ = 0;
  std::vector<Entry> heap_;  // worst kept entry at the front once full
};

}  // namespace pith
