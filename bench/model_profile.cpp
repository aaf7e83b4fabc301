#include "bench/model_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <random>

#include "backend/forward_profile.h"
#include "common/error.h"
#include "engine/kv_pool.h"
#include "engine/model_weights.h"

namespace pith::bench {

namespace {

struct Case {
  const char* name;
  uint32_t batch;
  uint32_t tokens;  // new tokens per sequence
};

constexpr Case kCases[] = {{"decode_b1", 1, 1},
                           {"decode_b32", 32, 1},
                           {"prefill512_b1", 1, 512},
                           {"prefill512_b32", 32, 16}};

}  // namespace

const std::vector<std::string>& forward_profile_cases() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Case& k : kCases) v.push_back(k.name);
    return v;
  }();
  return names;
}

void check_profile_cases(const std::vector<std::string>& only) {
  const auto& cases = forward_profile_cases();
  for (const std::string& name : only)
    if (std::find(cases.begin(), cases.end(), name) == cases.end())
      fail("--profile-cases: no case '{}' (cases: {})", name, fmt::join(cases, ", "));
}

nlohmann::json run_forward_profile(std::shared_ptr<const ModelWeights> weights,
                                   const BackendOptions& options, uint32_t context, int reps,
                                   const std::vector<std::string>& only) {
  const ModelConfig& c = weights->config;
  check_profile_cases(only);
  std::vector<Case> cases;
  for (const Case& k : kCases)
    if (only.empty() || std::find(only.begin(), only.end(), k.name) != only.end())
      cases.push_back(k);
  BackendOptions eo = options;
  const uint32_t ps = eo.kv_page_size;
  const uint32_t max_ctx = context + 512 + ps;
  // Pages sized as f32, the largest any backend stores; a state per sequence of batch 32.
  eo.kv_memory_bytes =
      size_t{32 + 2} * ((max_ctx + ps - 1) / ps) * kv_shape_for(c, ps, KvDType::F32).page_bytes();
  eo.state_memory_bytes = size_t{32 + 2} * c.recurrent_state_floats() * 4;
  auto backend = make_backend(weights, eo);
  Backend& engine = *backend;
  ForwardProfile probe;
  if (!engine.set_profile(&probe))
    fail("bench model --profile: the {} backend has no per-op profile", engine.info().name);
  engine.set_profile(nullptr);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(c.vocab_size) - 1);

  // One input of `n` tokens after `ctx` cached ones, top-1 at its last token.
  auto input = [&](const std::vector<uint32_t>& pages, uint32_t state, uint32_t ctx, uint32_t n) {
    SequenceInput s;
    s.state_slot = state;
    for (uint32_t i = 0; i < n; ++i) {
      s.tokens.push_back(tok(rng));
      s.positions.push_back(ctx + i);
    }
    const uint32_t total = ctx + n, np = (total + ps - 1) / ps;
    s.kv_pages.assign(pages.begin(), pages.begin() + np);
    s.last_page_len = total - (np - 1) * ps;
    s.outputs.push_back({n - 1, OutputKind::TopK, 1, 0});
    return s;
  };

  nlohmann::json out = nlohmann::json::object();
  std::vector<ForwardProfile> profiles;
  for (const Case& k : cases) {
    std::vector<std::vector<uint32_t>> pages(k.batch);
    for (auto& p : pages) p = engine.page_slots().allocate((max_ctx + ps - 1) / ps);
    // Hybrid models: a recurrent state per sequence (it advances with every profiled step; the
    // work per step does not depend on it).
    std::vector<uint32_t> states(k.batch, SequenceInput::kNoState);
    if (c.hybrid()) {
      states = engine.state_slots().allocate(k.batch);
      engine.clear_states(states);
    }
    // The context, filled in chunks of 512 tokens (not profiled).
    for (uint32_t done = 0; done < context;) {
      const uint32_t n = std::min<uint32_t>(512, context - done);
      std::vector<SequenceInput> batch;
      for (uint32_t i = 0; i < k.batch; ++i) batch.push_back(input(pages[i], states[i], done, n));
      engine.forward(batch);
      done += n;
    }
    auto step = [&] {
      std::vector<SequenceInput> batch;
      for (uint32_t i = 0; i < k.batch; ++i)  // rewrites the same KV slots
        batch.push_back(input(pages[i], states[i], context, k.tokens));
      engine.forward(batch);
    };
    // One step unprofiled: its K/V writes are the first touches of the pages past the context,
    // whose page faults (256 per token on the 1B shape: one per layer, head and K/V block) had
    // made "qk_rope_kv" a quarter of a batch-32 decode step.
    step();
    ForwardProfile prof;
    engine.set_profile(&prof);
    for (int r = 0; r < reps; ++r) step();
    engine.set_profile(nullptr);
    for (auto& p : pages) engine.page_slots().free(p);
    if (c.hybrid()) engine.state_slots().free(states);
    profiles.push_back(prof);
    nlohmann::json ops = nlohmann::json::object();
    for (size_t i = 0; i < ForwardProfile::kCount; ++i)
      ops[ForwardProfile::kNames[i]] = double(prof.ns[i]) / 1e6 / double(prof.forwards);
    out[k.name] = {{"batch", k.batch},
                   {"tokens", k.batch * k.tokens},
                   {"context", context},
                   {"ms_per_forward", double(prof.total_ns()) / 1e6 / double(prof.forwards)},
                   {"ops_ms", ops}};
  }

  const BackendInfo info = engine.info();
  fmt::print("per-op profile ({}, {} tokens of context, mean of {} forwards):\n",
             info.name == "cpu" ? fmt::format("{} threads", eo.n_threads) : info.device, context,
             reps);
  std::string head = fmt::format("{:<12}", "op");
  for (const Case& k : cases) head += fmt::format(" | {:>20}", k.name);
  fmt::print("{}\n", head);
  for (size_t i = 0; i < ForwardProfile::kCount; ++i) {
    std::string line = fmt::format("{:<12}", ForwardProfile::kNames[i]);
    for (const ForwardProfile& p : profiles) {
      const double ms = double(p.ns[i]) / 1e6 / double(p.forwards);
      line += fmt::format(" | {:>9.2f} ms {:>5.1f}%", ms,
                          100.0 * double(p.ns[i]) / double(std::max<int64_t>(p.total_ns(), 1)));
    }
    fmt::print("{}\n", line);
  }
  std::string total = fmt::format("{:<12}", "total");
  for (const ForwardProfile& p : profiles)
    total +=
        fmt::format(" | {:>9.2f} ms {:>6}", double(p.total_ns()) / 1e6 / double(p.forwards), "");
  fmt::print("{}\n", total);
  return out;
}

}  // namespace pith::bench
