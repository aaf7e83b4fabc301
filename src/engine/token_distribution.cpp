// Top-K selection over a logit row with a bounded heap. See token_distribution.h.
#include "engine/token_distribution.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernels/simd_avx2.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

double sum_exp_scalar(const float* x, size_t n, float m) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - m);
  return sum;
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
// 8-lane f32 exp sums, flushed into a double every 1024 entries so a 128k vocabulary keeps
// ~1e-7 relative accuracy.
double sum_exp_avx2(const float* x, size_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  double total = 0;
  size_t i = 0;
  while (i + 8 <= n) {
    const size_t end = std::min(n, i + 1024);
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= end; i += 8) acc = _mm256_add_ps(acc, avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    total += avx2::hsum(acc);
  }
  return total + sum_exp_scalar(x + i, n - i, m);
}
#pragma GCC pop_options

}  // namespace

double logsumexp(const float* logits, size_t n) {
  if (n == 0) return -INFINITY;
  const KernelIsa isa = best_isa();
  const float mx = max_value(logits, n, isa);
  if (std::isinf(mx)) return mx;
  const double sum = isa == KernelIsa::Scalar ? sum_exp_scalar(logits, n, mx)
                                              : sum_exp_avx2(logits, n, mx);
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
