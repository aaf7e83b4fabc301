// The SDK's sampler and stop conditions, compiled natively from <pith/sampling.hpp>: logit
// biases, presence / frequency / repetition penalties (vLLM's semantics), min_tokens holding
// back ending tokens, and the stop rules that go with them; <pith/masked_sampling.hpp>'s two
// grammar samplers (the whole vocabulary masked here, or the server's masked top-K) drawing alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <pith/masked_sampling.hpp>
#include <pith/sampling.hpp>

namespace pith {
namespace {

// Whole-vocabulary logits, as PITH_TOP_K_LOGITS delivers them.
Distribution logits(std::vector<float> values) {
  Distribution d;
  d.logits = true;
  for (uint32_t i = 0; i < values.size(); ++i) d.ids.push_back(i);
  d.probs = std::move(values);
  return d;
}

// A top-K distribution sorted by probability, as the default next-token path delivers it.
Distribution top_k(std::vector<uint32_t> ids, std::vector<float> probs) {
  return Distribution{std::move(ids), std::move(probs), false};
}

SamplerConfig greedy_with(void (*set)(SamplerConfig&)) {
  SamplerConfig c;
  set(c);
  return c;
}

TEST(Sampler, PenaltiesAndBiasesAskForLogits) {
  EXPECT_EQ(Sampler().candidates(), 1u);
  EXPECT_EQ(Sampler::top_k(40, 1.0f, 1).candidates(), 40u);
  EXPECT_EQ(Sampler(greedy_with([](SamplerConfig& c) { c.presence_penalty = 0.5f; })).candidates(),
            PITH_TOP_K_LOGITS);
  EXPECT_EQ(Sampler(greedy_with([](SamplerConfig& c) {
              c.logit_bias = {{3, 1.0f}};
            })).candidates(),
            PITH_TOP_K_LOGITS);
  EXPECT_EQ(
      Sampler(greedy_with([](SamplerConfig& c) { c.repetition_penalty = 1.1f; })).candidates(),
      PITH_TOP_K_LOGITS);
}

TEST(Sampler, LogitBiasForcesAndBansTokens) {
  Distribution d = logits({3.0f, 1.0f, 0.5f, -2.0f, 0.0f});
  Sampler plain;
  EXPECT_EQ(plain.sample(d), 0u);
  Sampler forced(greedy_with([](SamplerConfig& c) { c.logit_bias = {{3, 100.0f}}; }));
  EXPECT_EQ(forced.sample(d), 3u);
  Sampler banned(greedy_with([](SamplerConfig& c) { c.logit_bias = {{0, -100.0f}}; }));
  EXPECT_EQ(banned.sample(d), 1u);
  // At temperature 1 a +100 bias leaves the other tokens ~e^-97 of the mass: always token 3.
  SamplerConfig hot;
  hot.temperature = 1.0f;
  hot.logit_bias = {{3, 100.0f}};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    hot.seed = seed;
    Sampler s(hot);
    EXPECT_EQ(s.sample(d), 3u) << seed;
  }
}

TEST(Sampler, PresencePenaltyIsPaidOnceFrequencyPenaltyPerOccurrence) {
  Distribution d = logits({2.0f, 1.5f, 1.2f, 0.0f});
  Sampler presence(greedy_with([](SamplerConfig& c) { c.presence_penalty = 0.6f; }));
  EXPECT_EQ(presence.sample(d), 0u);  // 2.0
  EXPECT_EQ(presence.sample(d), 1u);  // 0 is now 1.4 < 1.5
  EXPECT_EQ(presence.sample(d), 0u);  // 1 is now 0.9, 0 still 1.4
  EXPECT_EQ(presence.sample(d), 0u);  // taken twice, but the presence penalty is paid once
}

TEST(Sampler, FrequencyPenaltyGrowsWithEachOccurrence) {
  Distribution d = logits({2.0f, 1.5f, 0.0f});
  Sampler s(greedy_with([](SamplerConfig& c) { c.frequency_penalty = 0.3f; }));
  std::vector<uint32_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(s.sample(d));
  // 0 (2.0) 0 (1.7) 1 (1.5 vs 1.4) 0 (1.4 vs 1.2) 1 (1.2 vs 1.1) 0 (1.1 vs 0.9)
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 0, 1, 0, 1, 0}));
}

TEST(Sampler, RepetitionPenaltyDependsOnTheLogitsSign) {
  auto penalized = [] {
    Sampler s(greedy_with([](SamplerConfig& c) { c.repetition_penalty = 2.0f; }));
    s.observe_prompt({0});
    return s;
  };
  // Negative logit multiplied: -0.2 * 2 = -0.4, still above -0.5.
  EXPECT_EQ(penalized().sample(logits({-0.2f, -0.5f, -4.0f})), 0u);
  // The same probabilities shifted by +3: 2.8 / 2 = 1.4 falls below 2.5. A rule on
  // probabilities could not tell the two apart: why penalties ask for raw logits.
  EXPECT_EQ(penalized().sample(logits({2.8f, 2.5f, -1.0f})), 1u);
}

TEST(Sampler, RepetitionPenaltyCoversSampledTokensOnce) {
  Sampler s(greedy_with([](SamplerConfig& c) { c.repetition_penalty = 1.5f; }));
  Distribution d = logits({3.0f, 2.5f, 0.1f});
  EXPECT_EQ(s.sample(d), 0u);  // nothing seen yet
  EXPECT_EQ(s.sample(d), 1u);  // 3.0 / 1.5 = 2.0 < 2.5
  EXPECT_EQ(s.sample(d), 0u);  // 2.0 vs 2.5 / 1.5 = 1.67: divided once however often seen
}

TEST(Sampler, AdjustedProbabilitiesAreASoftmax) {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.logit_bias = {{1, 1.0f}};
  c.seed = 7;
  Sampler s(c);
  // Empirical frequencies follow softmax(0, 1 + 1, 0) = (e^0, e^2, e^0) / sum.
  std::vector<int> count(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.sample(logits({0.0f, 1.0f, 0.0f}))];
  const double z = 2 + std::exp(2.0);
  EXPECT_NEAR(count[1] / double(n), std::exp(2.0) / z, 0.015);
  EXPECT_NEAR(count[0] / double(n), 1 / z, 0.015);
}

TEST(Sampler, MinTokensHoldsBackEndingTokensOnBothPaths) {
  Sampler a;
  a.suppress_until(2, {0});
  EXPECT_EQ(a.candidates(), 2u);  // room for the held-back token in a top-K
  Distribution sorted = top_k({0, 2, 1}, {0.6f, 0.3f, 0.1f});
  EXPECT_EQ(a.sample(sorted), 2u);
  EXPECT_EQ(a.sample(sorted), 2u);
  EXPECT_EQ(a.sample(sorted), 0u);  // two sampled: token 0 allowed again
  EXPECT_EQ(a.candidates(), 1u);

  Sampler b(greedy_with([](SamplerConfig& c) { c.presence_penalty = 0.01f; }));
  b.suppress_until(1, {0});
  EXPECT_EQ(b.sample(logits({5.0f, 1.0f})), 1u);
  EXPECT_EQ(b.sample(logits({5.0f, 1.0f})), 0u);
}

TEST(Stop, MinTokensStopTokensAndIgnoreEos) {
  Stop s;
  s.max_tokens = 10;
  s.eos_ids = {2};
  s.stop_ids = {7};
  s.min_tokens = 3;
  EXPECT_STREQ(s.check({2}, ""), "");  // before min_tokens nothing ends it
  EXPECT_STREQ(s.check({1, 7}, ""), "");
  EXPECT_STREQ(s.check({1, 1, 2}, ""), "eos");
  EXPECT_STREQ(s.check({1, 1, 7}, ""), "stop");
  s.stop_at_eos = false;  // ignore_eos: eos is a token like any other; stop tokens still stop
  EXPECT_STREQ(s.check({1, 1, 2}, ""), "");
  EXPECT_STREQ(s.check({1, 1, 7}, ""), "stop");
  EXPECT_EQ(s.ending_ids(), std::vector<uint32_t>{7});
  s.stop_at_eos = true;
  EXPECT_EQ(s.ending_ids(), (std::vector<uint32_t>{7, 2}));
  Stop tight;
  tight.max_tokens = 2;
  tight.min_tokens = 5;  // max_tokens still wins
  EXPECT_STREQ(tight.check({1, 1}, ""), "length");
}

TEST(Distribution, ParsesLogitsFlag) {
  std::string bytes;
  uint32_t k = 2, ids[2] = {0, 1};
  float vals[2] = {-3.5f, 7.25f};
  bytes.append(reinterpret_cast<const char*>(&k), 4);
  bytes.append(reinterpret_cast<const char*>(ids), 8);
  bytes.append(reinterpret_cast<const char*>(vals), 8);
  auto d = parse_distributions(bytes, true);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].logits);
  EXPECT_FLOAT_EQ(d[0].probs[0], -3.5f);
  EXPECT_FALSE(parse_distributions(bytes)[0].logits);
}

// sample_masked over the whole vocabulary (id order) and sample_ranked over the same allowed
// tokens as the server ranks them (sorted) draw from one distribution: p^(1/T) over the allowed
// tokens, the best one when greedy, uniform when every probability underflowed, nothing when
// nothing is allowed.
TEST(GrammarSamplers, MaskedAndRankedDrawAlike) {
  Distribution whole;
  const std::vector<float> p = {0.05f, 0.3f, 0.1f, 0.2f, 0.15f, 0.2f};
  for (uint32_t i = 0; i < p.size(); ++i) whole.ids.push_back(i);
  whole.probs = p;
  const std::vector<uint64_t> mask = {0b101110};  // tokens 1, 2, 3, 5
  const Distribution ranked = top_k({1, 3, 5, 2}, {0.3f, 0.2f, 0.2f, 0.1f});
  Rng rng(3);
  EXPECT_EQ(sample_masked(whole, mask, 0, rng), 1u);
  EXPECT_EQ(sample_ranked(ranked, 0, rng), 1u);
  EXPECT_EQ(sample_masked(whole, {0}, 1, rng), UINT32_MAX);
  EXPECT_EQ(sample_ranked(Distribution{}, 1, rng), UINT32_MAX);
  for (float t : {1.0f, 0.5f}) {
    double want[6] = {}, total = 0;
    for (uint32_t i : {1u, 2u, 3u, 5u}) total += want[i] = std::pow(double(p[i]), 1.0 / t);
    const int n = 40000;
    double masked[6] = {}, from_ranked[6] = {};
    for (int k = 0; k < n; ++k) {
      masked[sample_masked(whole, mask, t, rng)] += 1.0 / n;
      from_ranked[sample_ranked(ranked, t, rng)] += 1.0 / n;
    }
    for (uint32_t i = 0; i < 6; ++i) {
      EXPECT_NEAR(masked[i], want[i] / total, 0.01) << "masked, T " << t << ", token " << i;
      EXPECT_NEAR(from_ranked[i], want[i] / total, 0.01) << "ranked, T " << t << ", token " << i;
    }
  }
  // Every allowed probability underflowed: uniform over the allowed tokens.
  const Distribution zeros = top_k({7, 8}, {0.0f, 0.0f});
  int sevens = 0;
  for (int k = 0; k < 2000; ++k) sevens += sample_ranked(zeros, 1, rng) == 7;
  EXPECT_NEAR(sevens / 2000.0, 0.5, 0.05);
}

}  // namespace
}  // namespace pith
