// Top-K selection and softmax normalisers over logit rows. See token_distribution.h.
#include "engine/token_distribution.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/simd_avx2.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

double sum_exp_scalar(const float* x, size_t n, float m) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - m);
  return sum;
}

// `a` ranks before `b`: higher logit, ties by lower id. As a heap comparator it keeps the
// worst kept entry at the front.
inline bool better(const TopKSelector::Entry& a, const TopKSelector::Entry& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
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
    for (; i + 8 <= end; i += 8)
      acc = _mm256_add_ps(acc, avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    total += avx2::hsum(acc);
  }
  return total + sum_exp_scalar(x + i, n - i, m);
}

// Indices (relative to x) of the lanes >= threshold, 8 at a time; calls on_hit(i) for each and
// re-reads the threshold after every hit (it only rises).
template <typename Threshold, typename OnHit>
size_t scan_ge_avx2(const float* x, size_t n, Threshold&& threshold, OnHit&& on_hit) {
  __m256 th = _mm256_set1_ps(threshold());
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // Four groups per test: the common case (nothing beats the threshold) is one branch.
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
    const __m256 any = _mm256_or_ps(
        _mm256_or_ps(_mm256_cmp_ps(a, th, _CMP_GE_OQ), _mm256_cmp_ps(b, th, _CMP_GE_OQ)),
        _mm256_or_ps(_mm256_cmp_ps(c, th, _CMP_GE_OQ), _mm256_cmp_ps(d, th, _CMP_GE_OQ)));
    if (_mm256_movemask_ps(any) == 0) continue;
    for (size_t j = i; j < i + 32; j += 8) {
      unsigned mask = static_cast<unsigned>(
          _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), th, _CMP_GE_OQ)));
      while (mask != 0) {
        const unsigned lane = static_cast<unsigned>(__builtin_ctz(mask));
        mask &= mask - 1;
        on_hit(j + lane);
        th = _mm256_set1_ps(threshold());
      }
    }
  }
  return i;
}
// Bit j of the result: logits x[j] >= threshold, for j < 64 (n == 64).
uint64_t ge_bits_avx2(const float* x, float threshold) {
  const __m256 th = _mm256_set1_ps(threshold);
  uint64_t bits = 0;
  for (unsigned j = 0; j < 64; j += 8)
    bits |= uint64_t(
                unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), th, _CMP_GE_OQ))))
            << j;
  return bits;
}
#pragma GCC pop_options

// `n` (<= 64) bits of `mask` starting at bit `at`.
uint64_t mask_bits(const uint64_t* mask, size_t at, size_t n) {
  const size_t w = at / 64, shift = at % 64;
  uint64_t bits = mask[w] >> shift;
  if (shift != 0 && shift + n > 64) bits |= mask[w + 1] << (64 - shift);
  return n == 64 ? bits : bits & ((uint64_t{1} << n) - 1);
}

}  // namespace

double logsumexp(const float* logits, size_t n) {
  if (n == 0) return -INFINITY;
  const SoftmaxPartial p = softmax_partial(logits, n);
  return combine_logsumexp(&p, 1);
}

SoftmaxPartial softmax_partial(const float* logits, size_t n) {
  SoftmaxPartial p;
  if (n == 0) return p;
  const KernelIsa isa = best_isa();
  p.max = max_value(logits, n, isa);
  if (std::isinf(p.max)) return p;  // all -inf (sum 0) or an +inf entry (max decides)
  p.sum =
      isa == KernelIsa::Scalar ? sum_exp_scalar(logits, n, p.max) : sum_exp_avx2(logits, n, p.max);
  return p;
}

double combine_logsumexp(const SoftmaxPartial* parts, size_t n_parts) {
  float m = -INFINITY;
  for (size_t i = 0; i < n_parts; ++i) m = std::max(m, parts[i].max);
  if (std::isinf(m)) return m;
  double sum = 0;
  for (size_t i = 0; i < n_parts; ++i)
    if (parts[i].sum > 0) sum += parts[i].sum * std::exp(double(parts[i].max) - m);
  return m + std::log(sum);
}

void TopKSelector::reset(uint32_t k) {
  k_ = k;
  heap_.clear();
  heap_.reserve(k);
}

void TopKSelector::offer(float logit, int32_t id) {
  const Entry e{logit, id};
  if (heap_.size() < k_) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), better);
  } else if (better(e, heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), better);
    heap_.back() = e;
    std::push_heap(heap_.begin(), heap_.end(), better);
  }
}

void TopKSelector::scan(const float* logits, size_t n, int32_t first_id) {
  if (k_ == 0) return;
  size_t i = 0;
  // Fill: every entry is kept until there are k.
  for (; i < n && heap_.size() < k_; ++i) offer(logits[i], first_id + static_cast<int32_t>(i));
  if (i < n && best_isa() != KernelIsa::Scalar) {
    // `>=` lets equal logits through to `offer`, which breaks the tie by id.
    i += scan_ge_avx2(
        logits + i, n - i, [&] { return heap_.front().logit; },
        [&](size_t j) { offer(logits[i + j], first_id + static_cast<int32_t>(i + j)); });
  }
  for (; i < n; ++i)
    if (logits[i] >= heap_.front().logit) offer(logits[i], first_id + static_cast<int32_t>(i));
}

void TopKSelector::scan_allowed(const float* logits, size_t n, int32_t first_id,
                                const uint64_t* allowed) {
  if (k_ == 0) return;
  const bool avx2 = best_isa() != KernelIsa::Scalar;
  // 64 tokens at a time: skipped when none is allowed (a grammar usually allows few), else
  // only the allowed ones at or above the threshold are offered, once the heap is full.
  for (size_t i = 0; i < n; i += 64) {
    const size_t len = std::min<size_t>(64, n - i);
    uint64_t hits = mask_bits(allowed, static_cast<size_t>(first_id) + i, len);
    if (hits == 0) continue;
    if (heap_.size() == k_ && len == 64 && avx2)
      hits &= ge_bits_avx2(logits + i, heap_.front().logit);
    while (hits != 0) {
      const size_t j = i + static_cast<size_t>(__builtin_ctzll(hits));
      hits &= hits - 1;
      if (heap_.size() < k_ || logits[j] >= heap_.front().logit)
        offer(logits[j], first_id + static_cast<int32_t>(j));
    }
  }
}

void TopKSelector::merge(const TopKSelector& other) {
  for (const Entry& e : other.heap_) offer(e.logit, e.id);
}

std::vector<TopKSelector::Entry> TopKSelector::sorted() const {
  std::vector<Entry> out = heap_;
  std::sort(out.begin(), out.end(), better);
  return out;
}

TokenDistribution TopKSelector::distribution(double lse) const {
  TokenDistribution d;
  const std::vector<Entry> best = sorted();
  d.ids.resize(best.size());
  d.probs.resize(best.size());
  for (size_t i = 0; i < best.size(); ++i) {
    d.ids[i] = best[i].id;
    d.probs[i] = static_cast<float>(std::exp(double(best[i].logit) - lse));
  }
  return d;
}

TokenDistribution top_k_distribution(const float* logits, size_t n, uint32_t k,
                                     const uint64_t* allowed, const LogitAdjustments* adjust) {
  std::vector<float> adjusted;
  if (adjust && !adjust->empty()) {
    adjusted.assign(logits, logits + n);
    for (const LogitAdjustment& a : *adjust)
      if (a.token < n) adjusted[a.token] = adjust_logit(adjusted[a.token], a);
    logits = adjusted.data();
  }
  TopKSelector sel(static_cast<uint32_t>(std::min<size_t>(k, n)));
  if (allowed)
    sel.scan_allowed(logits, n, 0, allowed);
  else
    sel.scan(logits, n, 0);
  return sel.distribution(logsumexp(logits, n));
}

}  // namespace pith
