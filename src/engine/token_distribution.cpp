// Top-K selection over a logit row with a bounded heap. See token_distribution.h.
#include "engine/token_distribution.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pith {

double logsumexp(const float* logits, size_t n) {
  if (n == 0) return -INFINITY;
  float mx = logits[0];
  for (size_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
  return mx + std::log(sum);
}

TokenDistribution top_k_distribution(const float* logits, size_t n, uint32_t k) {
  TokenDistribution d;
  size_t kk = std::min<size_t>(k, n);
  if (kk == 0) return d;
  // `better(a, b)`: a ranks before b. The heap keeps the worst kept entry at its front.
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> heap;
  heap.reserve(kk);
  for (size_t i = 0; i < n; ++i) {
    int32_t id = static_cast<int32_t>(i);
    if (heap.size() < kk) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  double lse = logsumexp(logits, n);
  d.ids = std::move(heap);
  d.probs.resize(kk);
  for (size_t i = 0; i < kk; ++i)
    d.probs[i] = static_cast<float>(std::exp(double(logits[d.ids[i]]) - lse));
  return d;
}

}  // namespace pith
