// Gated DeltaNet kernels against a float64 reference written from the definitions: the
// recurrent and the chunked delta rule (across chunk boundaries, with a carried state, with
// key and value sizes that differ), the causal convolution with its window carried across
// calls, and the L2 normalisation.
#include "engine/delta_rule.h"

#include "engine/kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace pith {
namespace {

struct Case {
  uint32_t n, dk, dv;
  std::vector<float> q, k, v, g, beta, state;
};

Case make_case(uint32_t n, uint32_t dk, uint32_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Case c{n, dk, dv, {}, {}, {}, {}, {}, {}};
  auto unit_rows = [&](std::vector<float>& x) {
    x.resize(size_t{n} * dk);
    for (float& e : x) e = normal(rng);
    for (uint32_t t = 0; t < n; ++t) l2_normalize(x.data() + size_t{t} * dk, dk, 1e-6f);
  };
  unit_rows(c.q);
  unit_rows(c.k);
  c.v.resize(size_t{n} * dv);
  for (float& e : c.v) e = normal(rng);
  for (uint32_t t = 0; t < n; ++t) {
    c.g.push_back(-2.0f * unit(rng));  // decays from 1 down to e^-2
    c.beta.push_back(unit(rng));
  }
  c.state.resize(size_t{dv} * dk);
  for (float& e : c.state) e = 0.3f * normal(rng);
  return c;
}

// The definition, token by token, in double: S <- e^g S; u = beta (v - S k); S += u k^T;
// o = S q / sqrt(dk).
std::vector<double> reference(const Case& c, std::vector<double>& S) {
  S.assign(c.state.begin(), c.state.end());
  std::vector<double> out(size_t{c.n} * c.dv);
  for (uint32_t t = 0; t < c.n; ++t) {
    const float* q = &c.q[size_t{t} * c.dk];
    const float* k = &c.k[size_t{t} * c.dk];
    for (uint32_t j = 0; j < c.dv; ++j) {
      double* row = &S[size_t{j} * c.dk];
      double sk = 0;
      for (uint32_t i = 0; i < c.dk; ++i) sk += (row[i] *= std::exp(double(c.g[t]))) * k[i];
      const double u = c.beta[t] * (c.v[size_t{t} * c.dv + j] - sk);
      double o = 0;
      for (uint32_t i = 0; i < c.dk; ++i) o += (row[i] += u * k[i]) * q[i];
      out[size_t{t} * c.dv + j] = o / std::sqrt(double(c.dk));
    }
  }
  return out;
}

DeltaRuleInputs inputs(const Case& c, std::vector<float>& out, uint32_t from = 0) {
  out.assign(size_t{c.n} * c.dv, 0.0f);
  DeltaRuleInputs in;
  in.q = c.q.data() + size_t{from} * c.dk;
  in.k = c.k.data() + size_t{from} * c.dk;
  in.v = c.v.data() + size_t{from} * c.dv;
  in.g = c.g.data() + from;
  in.beta = c.beta.data() + from;
  in.q_stride = in.k_stride = c.dk;
  in.v_stride = c.dv;
  in.g_stride = 1;
  in.out = out.data() + size_t{from} * c.dv;
  in.out_stride = c.dv;
  return in;
}

double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
  return worst;
}

// Every DeltaRule test runs with the best kernels of this CPU and with the generic ones.
class DeltaRule : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    set_isa_cap(GetParam());
  }
  void TearDown() override { set_isa_cap(KernelIsa::Avx512); }
};

TEST_P(DeltaRule, RecurrentFormMatchesTheDefinition) {
  for (auto [n, dk, dv] : {std::tuple{1u, 32u, 32u}, {7u, 16u, 24u}, {50u, 64u, 64u}}) {
    Case c = make_case(n, dk, dv, n);
    std::vector<double> S_ref;
    const std::vector<double> want = reference(c, S_ref);
    std::vector<float> out, S = c.state;
    delta_rule_recurrent(S.data(), inputs(c, out), n, dk, dv);
    EXPECT_LT(worst_error(out, want), 2e-5) << n << " tokens";
    EXPECT_LT(worst_error(S, S_ref), 2e-5) << n << " tokens";
  }
}

TEST_P(DeltaRule, ChunkedFormMatchesTheDefinitionAcrossChunks) {
  // Within one chunk, exactly one chunk, and several chunks with a partial last one.
  for (auto [n, dk, dv] : {std::tuple{5u, 32u, 32u},
                           {kDeltaRuleChunk, 32u, 32u},
                           {2 * kDeltaRuleChunk + 9, 16u, 24u},
                           {200u, 128u, 128u}}) {
    Case c = make_case(n, dk, dv, 100 + n);
    std::vector<double> S_ref;
    const std::vector<double> want = reference(c, S_ref);
    std::vector<float> out, S = c.state;
    DeltaRuleScratch scratch;
    delta_rule_chunked(S.data(), inputs(c, out), n, dk, dv, scratch);
    EXPECT_LT(worst_error(out, want), 1e-4) << n << " tokens";
    EXPECT_LT(worst_error(S, S_ref), 1e-4) << n << " tokens";
  }
}

TEST_P(DeltaRule, SplitCallsCarryTheStateLikeOneCall) {
  // A prefill in two pieces (chunked, then decode steps) ends where one call does.
  Case c = make_case(90, 32, 32, 7);
  std::vector<double> S_ref;
  const std::vector<double> want = reference(c, S_ref);
  std::vector<float> out, S = c.state;
  DeltaRuleScratch scratch;
  DeltaRuleInputs first = inputs(c, out);
  delta_rule_chunked(S.data(), first, 70, c.dk, c.dv, scratch);
  std::vector<float> out_tail;
  DeltaRuleInputs rest = inputs(c, out_tail, 70);
  rest.out = out.data() + size_t{70} * c.dv;  // into the same output rows
  delta_rule_recurrent(S.data(), rest, 20, c.dk, c.dv);
  EXPECT_LT(worst_error(out, want), 1e-4);
  EXPECT_LT(worst_error(S, S_ref), 1e-4);
}

TEST_P(DeltaRule, StrongDecayForgetsTheInitialState) {
  // g = -80 zeroes the old state in one step: the output then depends on the token alone.
  Case c = make_case(3, 16, 16, 11);
  for (float& g : c.g) g = -80.0f;
  std::vector<float> out_a, out_b, S_a = c.state, S_b(c.state.size(), 0.0f);
  DeltaRuleScratch scratch;
  delta_rule_chunked(S_a.data(), inputs(c, out_a), 3, 16, 16, scratch);
  delta_rule_chunked(S_b.data(), inputs(c, out_b), 3, 16, 16, scratch);
  for (size_t i = 0; i < out_a.size(); ++i) EXPECT_NEAR(out_a[i], out_b[i], 1e-6f);
  for (float e : out_a) EXPECT_TRUE(std::isfinite(e));
}

INSTANTIATE_TEST_SUITE_P(Isas, DeltaRule, ::testing::Values(KernelIsa::Scalar, KernelIsa::Avx2),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(CausalConv, MatchesTheDefinitionAndCarriesItsWindow) {
  const uint32_t C = 5, K = 4, n = 9;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> w(C * K), x(n * C), window0((K - 1) * C);  // w: [C][K], as stored
  for (float& e : w) e = normal(rng);
  std::vector<float> w_t(K * C);  // the kernel's layout
  for (uint32_t c = 0; c < C; ++c)
    for (uint32_t i = 0; i < K; ++i) w_t[i * C + c] = w[c * K + i];
  for (float& e : x) e = normal(rng);
  for (float& e : window0) e = normal(rng);
  // Reference over the extended sequence [window0; x].
  std::vector<float> ext = window0;
  ext.insert(ext.end(), x.begin(), x.end());
  std::vector<double> want(n * C);
  for (uint32_t t = 0; t < n; ++t)
    for (uint32_t c = 0; c < C; ++c) {
      double s = 0;
      for (uint32_t i = 0; i < K; ++i) s += double(w[c * K + i]) * ext[(t + i) * C + c];
      want[t * C + c] = s / (1 + std::exp(-s));
    }
  // In pieces of 1, 2 and 6 tokens (shorter and longer than the window).
  std::vector<float> window = window0, out(n * C);
  uint32_t t = 0;
  for (uint32_t piece : {1u, 2u, 6u}) {
    causal_conv_silu(w_t.data(), window.data(), C, x.data() + t * C, C, out.data() + t * C, C,
                     piece, C, K);
    t += piece;
  }
  EXPECT_LT(worst_error(out, want), 1e-6);
  // The window now holds the last K-1 inputs.
  for (uint32_t r = 0; r < K - 1; ++r)
    for (uint32_t c = 0; c < C; ++c) EXPECT_EQ(window[r * C + c], x[(n - (K - 1) + r) * C + c]);
}

TEST(L2Normalize, GivesUnitVectorsAndSurvivesZero) {
  std::vector<float> x = {3, 4};
  l2_normalize(x.data(), 2, 1e-6f);
  EXPECT_NEAR(x[0], 0.6f, 1e-6f);
  EXPECT_NEAR(x[1], 0.8f, 1e-6f);
  std::vector<float> z = {0, 0, 0};
  l2_normalize(z.data(), 3, 1e-6f);
  for (float e : z) EXPECT_EQ(e, 0.0f);
}

}  // namespace
}  // namespace pith
