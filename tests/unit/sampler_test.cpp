// The SDK's sampler and stop conditions, compiled natively from <pith/sampling.hpp>: logit
// biases, presence / frequency / repetition penalties (vLLM's semantics), min_tokens holding
// back ending tokens, and the stop rules that go with them; <pith/masked_sampling.hpp>'s two
// grammar samplers (the whole vocabulary masked here, or the server's masked top-K) drawing alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <pith/masked_sampling.hpp>
#include <pith/sampling.hpp>
#include <random>

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

// Speculative sampling against a draft token (predicted outputs): the token's law is sample()'s
// whatever the draft, checked by frequency over many draws (fixed seeds: deterministic) on a
// distribution truncated by temperature, top_p and min_p; greedy returns the argmax; held-back
// and penalised tokens are treated as sample() treats them.
TEST(Sampler, SampleDraftKeepsSamplesLaw) {
  const Distribution d = top_k({5, 3, 9, 1, 7}, {0.4f, 0.3f, 0.15f, 0.1f, 0.05f});
  SamplerConfig c;
  c.temperature = 0.9f;
  c.top_p = 0.9f;  // drops the last token
  c.min_p = 0.05f;
  constexpr int kDraws = 200000;
  auto frequencies = [&](uint32_t draft, uint64_t seed) {
    c.seed = seed;
    Sampler s(c);
    std::vector<double> f(10, 0);
    for (int i = 0; i < kDraws; ++i)
      ++f[draft == UINT32_MAX ? s.sample(d) : s.sample_draft(d, draft)];
    for (double& x : f) x /= kDraws;
    return f;
  };
  const std::vector<double> law = frequencies(UINT32_MAX, 1);
  EXPECT_EQ(law[7], 0.0);  // cut by top_p
  for (uint32_t draft : {5u, 3u, 9u, 1u, 7u, 8u}) {
    const std::vector<double> got = frequencies(draft, 2 + draft);
    for (uint32_t t = 0; t < 10; ++t) {
      const double sigma = std::sqrt(std::max(law[t], 1e-6) * (1 - law[t]) / kDraws);
      EXPECT_NEAR(got[t], law[t], 5 * sigma * std::sqrt(2.0) + 1e-9)
          << "draft " << draft << ", token " << t;
    }
  }

  Sampler greedy;
  EXPECT_EQ(greedy.sample_draft(d, 3), 5u);  // the argmax, whatever the draft
  EXPECT_EQ(greedy.sample_draft(d, 5), 5u);

  Sampler held;
  held.suppress_until(1, {5});
  EXPECT_EQ(held.sample_draft(d, 5), 3u);  // a held-back draft is never taken
  EXPECT_EQ(held.sampled(), 1u);

  // Penalties apply to the whole vocabulary's logits as in sample(), and the drafted token
  // counts once it is returned.
  Sampler pen(greedy_with([](SamplerConfig& x) { x.presence_penalty = 2.0f; }));
  EXPECT_EQ(pen.sample_draft(logits({3.0f, 2.0f}), 0), 0u);
  EXPECT_EQ(pen.sample_draft(logits({3.0f, 2.0f}), 0), 1u);  // 3 - 2 < 2
}

// What the server does with a shaped step (abi.h forward_tokens_adjusted), in double: each
// logit adjusted, the allowed tokens ranked (ties by lower id), probabilities the softmax of the
// adjusted logits over the whole vocabulary, the best k kept.
Distribution server_step(const std::vector<float>& logits, uint32_t k, const StepShaping& sh) {
  std::vector<double> l(logits.begin(), logits.end());
  if (sh.adjust)
    for (const pith_logit_adjust_t& a : *sh.adjust) {  // in float, as the engine adjusts
      float x = logits[a.token] + a.bias;
      if (a.repetition != 1) x = x > 0 ? x / a.repetition : x * a.repetition;
      l[a.token] = x - a.penalty;
    }
  double max = -INFINITY, sum = 0;
  for (double x : l) max = std::max(max, x);
  for (double x : l) sum += std::exp(x - max);
  std::vector<uint32_t> ids;
  for (uint32_t t = 0; t < l.size(); ++t)
    if (!sh.allowed || ((*sh.allowed)[t / 64] >> (t % 64)) & 1) ids.push_back(t);
  std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return l[a] > l[b]; });
  if (ids.size() > k) ids.resize(k);
  Distribution d;
  d.ids = ids;
  for (uint32_t t : ids) d.probs.push_back(float(std::exp(l[t] - max) / sum));
  return d;
}

// A sampler whose penalties, biases and held-back tokens the server applies (shaping, then
// sample_step on the step's top candidates) draws the very tokens of one that applies them to
// the whole vocabulary's logits itself, step after step as the penalties grow: greedy and
// sampled, truncated by top_k / top_p, with and without a grammar's mask.
TEST(Sampler, ShapedStepsDrawAsTheWholeVocabulary) {
  const uint32_t V = 300;  // above the default 256 candidates: truncation matters
  std::mt19937 rng(41);
  std::normal_distribution<float> nd(0, 2);
  std::vector<uint32_t> prompt = {3, 4, 5, 250, 4};
  for (float t : {0.0f, 0.8f})
    for (int variant = 0; variant < 3; ++variant) {
      SamplerConfig c;
      c.temperature = t;
      c.seed = 11 + variant;
      c.presence_penalty = 0.5f;
      c.frequency_penalty = variant == 1 ? 0.3f : 0;
      c.repetition_penalty = variant == 2 ? 1.2f : 1;
      c.logit_bias = {{5, 3.0f}, {17, -2.0f}, {5, 1.0f}};  // a repeated id: the biases add up
      if (variant == 1) c.top_p = 0.9f;
      if (variant == 2) c.top_k = 20;
      Sampler whole(c), shaped(c);
      for (Sampler* s : {&whole, &shaped}) {
        s->observe_prompt(prompt);
        s->suppress_until(4, {0, 1});
      }
      std::vector<uint64_t> mask((V + 63) / 64);
      for (int step = 0; step < 200; ++step) {
        std::vector<float> l(V);
        for (float& x : l) x = nd(rng);
        l[0] = l[1] = 9;       // held back for the first 4 tokens, then likely
        l[7 + step % 5] += 4;  // a few tokens recur and pile up penalties
        const bool masked = step % 3 == 0;
        for (auto& w : mask) w = (uint64_t{rng()} << 32) | rng();
        const std::vector<uint64_t>* allowed = masked ? &mask : nullptr;
        const uint32_t a = whole.sample(logits(l), allowed);
        const StepShaping sh = shaped.shaping(allowed);
        const uint32_t b = shaped.sample_step(server_step(l, shaped.step_top_k(), sh));
        ASSERT_EQ(a, b) << "T " << t << " variant " << variant << " step " << step;
      }
    }
  EXPECT_EQ(Sampler().step_top_k(), 1u);
  EXPECT_EQ(Sampler(greedy_with([](SamplerConfig& c) { c.presence_penalty = 1; })).step_top_k(),
            1u);
  SamplerConfig hot;
  hot.temperature = 1;
  hot.frequency_penalty = 1;
  EXPECT_EQ(Sampler(hot).step_top_k(), 256u);  // the candidates, not the whole vocabulary
  EXPECT_EQ(Sampler(hot).shaping().adjust->size(), 0u);
  EXPECT_EQ(Sampler().shaping().adjust, nullptr);  // nothing to adjust: a plain step
  // A mask that allowed nothing: an empty step, no token, nothing recorded.
  for (Sampler s : {Sampler(), Sampler(hot)}) {
    EXPECT_EQ(s.sample_step(Distribution{}), UINT32_MAX);
    EXPECT_EQ(s.sampled(), 0u);
  }
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
