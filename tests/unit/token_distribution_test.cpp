// Top-K next-token distributions: sorted by probability with ties broken by lower id,
// probabilities from the softmax over the whole vocabulary, K clamped to the vocabulary, and
// logsumexp stable for large logits; the streaming pieces (TopKSelector over blocks in any
// order, SoftmaxPartial combination) give the same result as one pass over the whole row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/kernels/cpu_features.h"
#include "engine/token_distribution.h"

namespace pith {
namespace {

TEST(TokenDistribution, SortedWithTiesByLowerId) {
  std::vector<float> lg{0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
  auto d = top_k_distribution(lg.data(), lg.size(), 4);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{1, 3, 5, 4}));
  double z = 0;
  for (float x : lg) z += std::exp(double(x));
  EXPECT_NEAR(d.probs[0], std::exp(2.0) / z, 1e-7);
  EXPECT_NEAR(d.probs[3], std::exp(1.0) / z, 1e-7);
  EXPECT_EQ(top_k_distribution(lg.data(), lg.size(), 100).ids.size(), 6u);
  EXPECT_TRUE(top_k_distribution(lg.data(), lg.size(), 0).ids.empty());
}

TEST(TokenDistribution, MatchesFullSortOnRandomLogits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> lg(5000);
  for (auto& x : lg) x = nd(rng);
  auto d = top_k_distribution(lg.data(), lg.size(), 256);
  std::vector<int32_t> all(lg.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
  std::sort(all.begin(), all.end(),
            [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
  all.resize(256);
  EXPECT_EQ(d.ids, all);
  const double lse = logsumexp(lg.data(), lg.size());
  double total = 0;
  for (size_t i = 0; i < lg.size(); ++i) total += std::exp(lg[i] - lse);
  EXPECT_NEAR(total, 1.0, 1e-6);  // vectorised exp: ~1e-7 relative
  double ref = 0;
  for (float x : lg) ref += std::exp(double(x));
  EXPECT_NEAR(lse, std::log(ref), 1e-6);
}

TEST(TokenDistribution, LogsumexpIsStable) {
  std::vector<float> lg{1000.0f, 1000.0f};
  EXPECT_NEAR(logsumexp(lg.data(), 2), 1000.0 + std::log(2.0), 1e-9);
  auto d = top_k_distribution(lg.data(), 2, 2);
  EXPECT_NEAR(d.probs[0], 0.5f, 1e-7);
}

// Blocks scanned in a shuffled order by several selectors, then merged: same ids as the
// one-pass distribution, including ties that straddle blocks.
TEST(TokenDistribution, SelectorIsOrderIndependent) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 2);
  std::vector<float> lg(10000);
  for (auto& x : lg) x = std::round(nd(rng) * 8) / 8;  // coarse values: many exact ties
  for (uint32_t k : {1u, 7u, 256u}) {
    const TokenDistribution ref = top_k_distribution(lg.data(), lg.size(), k);
    constexpr size_t kBlock = 300;
    std::vector<size_t> order((lg.size() + kBlock - 1) / kBlock);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    TopKSelector a(k), b(k);
    std::vector<SoftmaxPartial> parts(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t b0 = order[i] * kBlock, n = std::min(kBlock, lg.size() - b0);
      (i % 2 ? a : b).scan(lg.data() + b0, n, static_cast<int32_t>(b0));
      parts[order[i]] = softmax_partial(lg.data() + b0, n);
    }
    a.merge(b);
    const double lse = combine_logsumexp(parts.data(), parts.size());
    EXPECT_NEAR(lse, logsumexp(lg.data(), lg.size()), 1e-6);  // f32 exp sums, other grouping
    const TokenDistribution d = a.distribution(lse);
    EXPECT_EQ(d.ids, ref.ids) << "k=" << k;
    ASSERT_EQ(d.probs.size(), ref.probs.size());
    for (size_t i = 0; i < d.probs.size(); ++i)
      EXPECT_NEAR(d.probs[i], ref.probs[i], 1e-6f * ref.probs[i]);
  }
}

// -inf (masked) logits never outrank finite ones; an all -inf row still yields k entries.
TEST(TokenDistribution, MaskedLogits) {
  std::vector<float> lg(64, -INFINITY);
  lg[40] = 1.0f;
  lg[3] = 2.0f;
  auto d = top_k_distribution(lg.data(), lg.size(), 3);
  ASSERT_EQ(d.ids.size(), 3u);
  EXPECT_EQ(d.ids[0], 3);
  EXPECT_EQ(d.ids[1], 40);
  EXPECT_EQ(d.probs[2], 0.0f);
  std::vector<float> all(16, -INFINITY);
  EXPECT_EQ(top_k_distribution(all.data(), all.size(), 4).ids.size(), 4u);
  EXPECT_TRUE(std::isinf(combine_logsumexp(nullptr, 0)));
}

// A token mask (a grammar's): the top-K holds only allowed tokens, by a full sort of them,
// with the whole vocabulary's probabilities; the streaming scan over blocks that start off a
// 64-token boundary gives the same; the scalar path too.
TEST(TokenDistribution, AllowedTokensOnly) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0, 3);
  const size_t n = 5003;
  std::vector<float> lg(n);
  for (auto& x : lg) x = std::round(nd(rng) * 4) / 4;  // exact ties
  const double lse = logsumexp(lg.data(), n);
  auto masked = [&](auto allow) {
    TokenMask m((n + 63) / 64, 0);
    for (size_t i = 0; i < n; ++i)
      if (allow(i)) m[i / 64] |= uint64_t{1} << (i % 64);
    return m;
  };
  const std::vector<TokenMask> masks = {
      masked([](size_t) { return false; }), masked([](size_t i) { return i == 4999; }),
      masked([](size_t i) { return i % 401 == 7; }), masked([](size_t i) { return i % 5 != 0; }),
      masked([](size_t) { return true; })};
  for (const TokenMask& m : masks)
    for (uint32_t k : {1u, 7u, 64u, 6000u}) {
      std::vector<int32_t> want;
      for (size_t i = 0; i < n; ++i)
        if (token_allowed(m.data(), static_cast<uint32_t>(i))) want.push_back(int32_t(i));
      std::sort(want.begin(), want.end(),
                [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
      if (want.size() > k) want.resize(k);
      const TokenDistribution d = top_k_distribution(lg.data(), n, k, m.data());
      ASSERT_EQ(d.ids, want) << "k=" << k;
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(d.probs[i], std::exp(lg[want[i]] - lse), 1e-6 * d.probs[i]);
      TopKSelector a(k), b(k);
      for (size_t b0 = 0, i = 0; b0 < n; b0 += 300, ++i)  // 300: blocks straddle mask words
        (i % 2 ? a : b)
            .scan_allowed(lg.data() + b0, std::min<size_t>(300, n - b0), static_cast<int32_t>(b0),
                          m.data());
      a.merge(b);
      EXPECT_EQ(a.distribution(lse).ids, want) << "blocks, k=" << k;
      ScopedIsaCap cap(KernelIsa::Scalar);
      EXPECT_EQ(top_k_distribution(lg.data(), n, k, m.data()).ids, want) << "scalar, k=" << k;
    }
}

// Logit adjustments (OutputSpec::adjust): the top-K and the probabilities are those of the
// adjusted logits, computed here from scratch in double: bias, then the repetition penalty by
// the sign of the biased logit, then the penalty; a banned token only when nothing else is left.
TEST(TokenDistribution, AdjustedLogits) {
  std::mt19937 rng(29);
  std::normal_distribution<float> nd(0, 3);
  const size_t n = 4099;
  std::vector<float> lg(n);
  for (auto& x : lg) x = nd(rng);
  LogitAdjustments adjust;
  for (uint32_t t = 0; t < n; t += 1 + static_cast<uint32_t>(rng() % 37)) {
    LogitAdjustment a{t, 0, 1, 0};
    switch (t % 5) {
      case 0:
        a.bias = 2.5f;
        break;
      case 1:
        a.repetition = 1.3f;
        break;  // positive logits shrink, negative ones grow
      case 2:
        a.penalty = 0.4f + float(t % 3);
        break;
      case 3:
        a = {t, -1.0f, 0.7f, 0.25f};
        break;
      default:
        a.penalty = kLogitBanPenalty;
        break;
    }
    adjust.push_back(a);
  }
  std::vector<double> want_l(lg.begin(), lg.end());
  for (const LogitAdjustment& a : adjust) {
    double x = double(lg[a.token]) + a.bias;
    if (a.repetition != 1) x = x > 0 ? x / a.repetition : x * a.repetition;
    want_l[a.token] = x - a.penalty;
  }
  double max = -INFINITY, sum = 0;
  for (double x : want_l) max = std::max(max, x);
  for (double x : want_l) sum += std::exp(x - max);
  TokenMask every_other((n + 63) / 64, 0x5555555555555555ull);
  for (const TokenMask* m : std::initializer_list<const TokenMask*>{nullptr, &every_other})
    for (uint32_t k : {1u, 40u, 4099u}) {
      std::vector<int32_t> want;
      for (size_t i = 0; i < n; ++i)
        if (!m || token_allowed(m->data(), static_cast<uint32_t>(i))) want.push_back(int32_t(i));
      std::stable_sort(want.begin(), want.end(),
                       [&](int32_t a, int32_t b) { return want_l[a] > want_l[b]; });
      if (want.size() > k) want.resize(k);
      const TokenDistribution d =
          top_k_distribution(lg.data(), n, k, m ? m->data() : nullptr, &adjust);
      ASSERT_EQ(d.ids, want) << "k=" << k << (m ? " masked" : "");
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(d.probs[i], std::exp(want_l[want[i]] - max) / sum, 1e-6 * d.probs[i] + 1e-30);
    }
  // Banned tokens rank last, probability 0: the top-(n) ends with them in id order.
  const TokenDistribution all = top_k_distribution(lg.data(), n, uint32_t(n), nullptr, &adjust);
  size_t banned = 0;
  for (const LogitAdjustment& a : adjust) banned += a.penalty == kLogitBanPenalty;
  for (size_t i = n - banned; i < n; ++i) EXPECT_EQ(all.probs[i], 0.0f) << i;
}

// The selector's scan and the partial softmax pick a SIMD or a scalar loop from best_isa(): the
// scalar loop (capped) gives the same ids, ties included, and the same sums as the host's.
TEST(TokenDistribution, ScalarPathMatchesHostPath) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0, 2);
  std::vector<float> lg(3001);
  for (auto& x : lg) x = std::round(nd(rng) * 8) / 8;  // many exact ties
  const TokenDistribution host = top_k_distribution(lg.data(), lg.size(), 64);
  const SoftmaxPartial host_part = softmax_partial(lg.data(), lg.size());
  ScopedIsaCap cap(KernelIsa::Scalar);
  const TokenDistribution scalar = top_k_distribution(lg.data(), lg.size(), 64);
  const SoftmaxPartial scalar_part = softmax_partial(lg.data(), lg.size());
  EXPECT_EQ(scalar.ids, host.ids);
  ASSERT_EQ(scalar.probs.size(), host.probs.size());
  for (size_t i = 0; i < host.probs.size(); ++i)
    EXPECT_NEAR(scalar.probs[i], host.probs[i], 1e-6f * host.probs[i]);
  EXPECT_EQ(scalar_part.max, host_part.max);
  EXPECT_NEAR(scalar_part.sum, host_part.sum, 1e-6 * host_part.sum);
}

}  // namespace
}  // namespace pith
