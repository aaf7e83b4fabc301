// The delta-rule benchmark (see bench_delta_rule.h).
#include "bench/bench_delta_rule.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "common/error.h"
#include "engine/delta_rule.h"

namespace pith::bench {

nlohmann::json run_delta_rule_bench(const DeltaRuleBenchOptions& o) {
  if (o.tokens == 0 || o.k_dim == 0 || o.v_dim == 0 || o.reps < 1)
    fail("bench delta-rule: tokens, sizes and reps must be positive");
  set_isa_cap(o.isa);
  const size_t n = o.tokens, dk = o.k_dim, dv = o.v_dim;
  // Unit queries and keys, decays near 1 and write strengths in (0, 1), as a trained layer.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> q(n * dk), k(n * dk), v(n * dv), g(n), beta(n), out(n * dv), S(dv * dk);
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  for (size_t t = 0; t < n; ++t) {
    l2_normalize(&q[t * dk], static_cast<uint32_t>(dk), 1e-6f);
    l2_normalize(&k[t * dk], static_cast<uint32_t>(dk), 1e-6f);
    g[t] = -0.1f * unit(rng);
    beta[t] = unit(rng);
  }
  DeltaRuleInputs in{q.data(), k.data(), v.data(), g.data(),   beta.data(), dk,
                     dk,       dv,       1,        out.data(), dv};
  DeltaRuleScratch scratch;
  auto time_one = [&](bool chunked) {
    std::fill(S.begin(), S.end(), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    if (chunked)
      delta_rule_chunked(S.data(), in, uint32_t(n), uint32_t(dk), uint32_t(dv), scratch);
    else
      delta_rule_recurrent(S.data(), in, uint32_t(n), uint32_t(dk), uint32_t(dv));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  time_one(true), time_one(false);  // warm-up
  std::vector<double> rec, chk;
  for (int r = 0; r < o.reps; ++r) {  // interleaved: the host's noise hits both forms alike
    rec.push_back(time_one(false));
    chk.push_back(time_one(true));
  }
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  const double r_s = median(rec), c_s = median(chk);
  fmt::print(
      "delta rule, one head (k_dim {}, v_dim {}), {} tokens, {} kernels, 1 thread, median of "
      "{}:\n",
      dk, dv, n, isa_name(o.isa), o.reps);
  fmt::print("  recurrent: {:.3f} ms ({:.2f} us/token)\n", r_s * 1e3, r_s * 1e6 / double(n));
  fmt::print("  chunked:   {:.3f} ms ({:.2f} us/token)\n", c_s * 1e3, c_s * 1e6 / double(n));
  fmt::print("chunked / recurrent speed: {:.2f}x\n", r_s / c_s);
  return {{"suite", "delta-rule"},
          {"tokens", n},
          {"k_dim", dk},
          {"v_dim", dv},
          {"isa", isa_name(o.isa)},
          {"reps", o.reps},
          {"recurrent_ms", r_s * 1e3},
          {"chunked_ms", c_s * 1e3},
          {"chunked_vs_recurrent", r_s / c_s}};
}

}  // namespace pith::bench
