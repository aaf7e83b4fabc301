// Top-K next-token distributions: sorted by probability with ties broken by lower id,
// probabilities from the softmax over the whole vocabulary, K clamped to the vocabulary, and
// logsumexp stable for large logits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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
  std::sort(all.begin(), all.end(), [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
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

}  // namespace
}  // namespace pith
