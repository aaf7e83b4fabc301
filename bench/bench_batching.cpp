#include "bench/bench_batching.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>

#include "bench/bench_stack.h"
#include "bench/inferlet_files.h"
#include "bench/machine_baselines.h"
#include "common/error.h"
#include "engine/model_loader.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

std::string inferlet_file(const BatchingBenchOptions& o, const std::string& name) {
  return find_inferlet(o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir, name);
}

struct RunResult {
  double seconds = 0;
  double mean_batch = 0;
  uint64_t tokens = 0;
  // The backend's own measures of its memory and matrix products (0: the host's, probed here).
  std::string backend;
  double device_bandwidth_gb_s = 0, device_peak_gflop_s = 0;
};

// `measure`: also take the backend's own measures (once a benchmark: they do not change).
RunResult run_once(const BatchingBenchOptions& o, const std::string& policy,
                   const std::string& wasm, bool measure) {
  ServingOptions so = bench_serving_options(o.model, o.device, o.threads, o.cache_dir);
  so.control.policy = policy;
  {
    // Room for every instance's context at once (no contention in this benchmark): pages for
    // instances * (prompt + generated) tokens of this model.
    auto probe = load_model(o.model, LoadOptions{.quiet = true});
    const auto& c = probe->config;
    size_t per_token = size_t{c.n_layers} * 2 * c.kv_dim() * sizeof(float);
    size_t tokens =
        size_t(o.instances) * (o.prompt_tokens + o.max_tokens + 2 * so.engine.kv_page_size);
    so.engine.kv_memory_bytes = tokens * per_token;
  }
  ServingStack stack(so);
  std::atomic<uint64_t> calls{0}, batches{0};
  stack.controller().set_batch_observer([&](const BatchStats& s) {
    if (s.type == CallType::Forward) {
      calls += s.calls;
      ++batches;
    }
  });
  auto program = stack.runtime().load_program_file(wasm);
  const uint32_t vocab = stack.weights().config.vocab_size;
  std::mt19937 rng(1234);
  std::vector<std::vector<std::string>> args;
  for (int i = 0; i < o.instances; ++i) {
    std::string csv;
    for (int t = 0; t < o.prompt_tokens; ++t) {
      if (t) csv.push_back(',');
      csv.append(std::to_string(rng() % vocab));
    }
    args.push_back({"greedy_abi", "--tokens", csv, "--max-tokens", std::to_string(o.max_tokens)});
  }
  // Warm the program (native build) outside the timed region.
  stack.launch(program, {"greedy_abi", "--tokens", "1", "--max-tokens", "1"})->wait();
  calls = 0;
  batches = 0;

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<runtime::Instance>> insts;
  for (auto& a : args) insts.push_back(stack.launch(program, a));
  for (auto& i : insts) {
    auto st = i->wait();
    if (st.kind != runtime::ExitStatus::Kind::Exited || st.code != 0)
      fail("batching bench: an instance ended with '{}'", st.reason);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RunResult r;
  r.seconds = secs;
  r.mean_batch = batches ? double(calls) / double(batches) : 0;
  r.tokens = uint64_t(o.instances) * uint64_t(o.max_tokens);
  r.backend = stack.backend().info().name;
  if (measure) {
    r.device_bandwidth_gb_s = stack.backend().weight_memory_bandwidth_gb_s(size_t{1} << 30);
    r.device_peak_gflop_s = stack.backend().matmul_peak_gflop_s();
  }
  return r;
}

}  // namespace

nlohmann::json run_batching_bench(const BatchingBenchOptions& o) {
  if (o.model.empty()) fail("pith bench batching needs -m MODEL");
  const std::string wasm = inferlet_file(o, "greedy_abi");
  std::vector<std::string> policies = o.policies;
  if (std::find(policies.begin(), policies.end(), "eager") == policies.end())
    policies.insert(policies.begin(), "eager");

  fmt::print("batching: {} instances x ({} prompt + {} generated tokens), model {}, {} runs\n",
             o.instances, o.prompt_tokens, o.max_tokens, o.model, o.runs);
  fmt::print("{:<10} {:>10} {:>12} {:>12} {:>10}\n", "policy", "req/s", "tok/s", "mean batch",
             "seconds");
  nlohmann::json per_policy = nlohmann::json::object();
  RunResult measured;  // the first run's, with the backend's measures
  for (const auto& p : policies) {
    std::vector<double> secs, batch;
    for (int r = 0; r < o.runs; ++r) {
      const bool first = measured.backend.empty();
      auto res = run_once(o, p, wasm, first);
      secs.push_back(res.seconds);
      batch.push_back(res.mean_batch);
      if (first) measured = res;
    }
    double s = median(secs);
    double rps = o.instances / s;
    double tps = double(o.instances) * o.max_tokens / s;
    per_policy[p] = {
        {"req_per_s", rps}, {"tok_per_s", tps}, {"mean_batch", median(batch)}, {"seconds", s}};
    fmt::print("{:<10} {:>10.2f} {:>12.1f} {:>12.1f} {:>10.2f}\n", p, rps, tps, median(batch), s);
  }
  const std::string main_policy = o.policies.empty() ? "eager" : o.policies.front();
  double eager = per_policy["eager"]["req_per_s"].get<double>();
  nlohmann::json out;
  out["suite"] = "batching";
  out["policy"] = main_policy;
  out["req_per_s"] = per_policy[main_policy]["req_per_s"];
  out["ratio_vs_eager"] = per_policy[main_policy]["req_per_s"].get<double>() / eager;
  out["instances"] = o.instances;
  out["per_policy"] = per_policy;
  fmt::print("{} vs eager: {:.2f}x\n", main_policy, out["ratio_vs_eager"].get<double>());

  // The roofline of batching on this machine, measured now: alone, a token streams every
  // weight (bandwidth-bound); batched, the weights are shared and the token costs its FLOPs
  // (compute-bound at best at the FMA peak). Their quotient bounds what any dispatch policy can
  // gain over eager, whatever the scheduler does. A GPU backend measures its own memory and
  // its own matrix products (cuBLASLt in the compute type); the CPU's are probed here.
  ThreadPool pool(static_cast<size_t>(o.threads));
  const bool device = measured.device_bandwidth_gb_s > 0 && measured.device_peak_gflop_s > 0;
  const double bw = device ? measured.device_bandwidth_gb_s
                           : measure_read_bandwidth_gb_s(pool, size_t{1} << 30, 3);
  auto weights = load_model(o.model, LoadOptions{.quiet = true});
  // The batched ceiling is set by the kernels this weight format multiplies with (int8 or BF16
  // dot products do 2-4x an f32 FMA's work), read off the FFN's gate matrix.
  const DType format = weights->layers.front().w_gate.rows > 0
                           ? weights->layers.front().w_gate.dtype
                           : weights->output.dtype;
  const PeakRate peak_rate = device ? PeakRate{measured.device_peak_gflop_s,
                                               measured.backend + " GEMM in its compute type"}
                                    : measure_weight_peak(pool, format, 3);
  const double peak = peak_rate.gops;
  const DecodeTokenCost cost = decode_token_cost(*weights, measured.backend == "cuda");
  const double eager_floor = bw * 1e9 / double(cost.bytes),
               batched_ceiling = peak * 1e9 / cost.flops;
  const double bound = batched_ceiling / std::min(eager_floor, batched_ceiling);
  const double eager_tps = per_policy["eager"]["tok_per_s"].get<double>();
  const double main_tps = per_policy[main_policy]["tok_per_s"].get<double>();
  out["read_bandwidth_gb_s"] = bw;
  out["peak_gflop_s"] = peak;
  out["peak_kernel"] = peak_rate.what;
  out["eager_floor_tok_s"] = eager_floor;
  out["batched_ceiling_tok_s"] = batched_ceiling;
  out["roofline_ratio_bound"] = bound;
  fmt::print(
      "roofline (measured now: {:.1f} GB/s read, {:.0f} G(FL)OP/s peak of {}; {:.1f} MB and "
      "{:.1f} MFLOP per token):\n"
      "  eager {:.0f} tok/s = {:.2f} of its bandwidth floor {:.0f} tok/s; {} {:.0f} tok/s = {:.2f} "
      "of the compute ceiling {:.0f} tok/s\n"
      "  no policy can beat eager by more than {:.1f}x on this machine and weight format\n",
      bw, peak, peak_rate.what, cost.bytes / 1e6, cost.flops / 1e6, eager_tps,
      eager_tps / eager_floor, eager_floor, main_policy, main_tps, main_tps / batched_ceiling,
      batched_ceiling, bound);
  return out;
}

}  // namespace pith::bench
