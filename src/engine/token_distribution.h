// From logits to what inferlets read: log-sum-exp and the top-K next-token distribution
// (ids sorted by probability, descending, ties by lower id; probabilities are the softmax over
// the full vocabulary, so they need not sum to 1 over the K entries).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/forward_batch.h"

namespace pith {

// log(sum(exp(logits))) over n entries: max-subtracted, vectorised exp (~2 ulp), partial sums
// flushed to double every 1024 entries. Cost O(n), ~0.1 ms for a 128k vocabulary.
double logsumexp(const float* logits, size_t n);

// The min(k, n) most likely tokens. Cost O(n + k log k) for the usual case where few logits
// beat the running K-th best (a bounded min-heap), O(n log k) at worst.
TokenDistribution top_k_distribution(const float* logits, size_t n, uint32_t k);

}  // namespace pith
