#include "bench/bench_overhead.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>

#include "bench/bench_stack.h"
#include "bench/inferlet_files.h"
#include "bench/machine_baselines.h"
#include "common/error.h"
#include "engine/model_loader.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::string inferlet_file(const OverheadBenchOptions& o, const std::string& name) {
  return find_inferlet(o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir, name);
}

ServingOptions stack_options(const OverheadBenchOptions& o) {
  ServingOptions so = bench_serving_options(o.model, o.device, o.threads, o.cache_dir);
  so.runtime.threads = 1;
  so.control.max_batch_seqs = 4096;
  return so;
}

// Sizes the KV pool for `tokens` context tokens of this model.
void size_kv(ServingOptions& so, size_t tokens) {
  auto w = load_model(so.model_path, LoadOptions{.quiet = true});
  const auto& c = w->config;
  so.engine.kv_memory_bytes = tokens * size_t{c.n_layers} * 2 * c.kv_dim() * sizeof(float);
}

std::string prompt_csv(int n, uint32_t vocab, uint32_t seed) {
  std::string csv;
  for (int t = 0; t < n; ++t) {
    if (t) csv.push_back(',');
    csv.append(std::to_string((seed * 7919u + t * 104729u) % vocab));
  }
  return csv;
}

// Fused baseline: the greedy loop of greedy_abi, in C++ on the engine directly.
double fused_tpot_ms(Backend& engine, const std::vector<int32_t>& prompt, int n) {
  const uint32_t ps = engine.page_size();
  auto pages = engine.page_slots().allocate((prompt.size() + n + ps) / ps + 1);
  std::vector<int32_t> input = prompt;
  uint32_t filled = 0;
  Clock::time_point first{}, last{};
  for (int step = 0; step < n; ++step) {
    SequenceInput s;
    s.tokens = input;
    for (size_t i = 0; i < input.size(); ++i)
      s.positions.push_back(filled + static_cast<uint32_t>(i));
    uint32_t total = filled + static_cast<uint32_t>(input.size());
    size_t used = (total + ps - 1) / ps;
    s.kv_pages.assign(pages.begin(), pages.begin() + used);
    s.last_page_len = total - static_cast<uint32_t>(used - 1) * ps;
    s.outputs.push_back({static_cast<uint32_t>(input.size() - 1), OutputKind::TopK, 1, 0});
    auto r = engine.forward({s});
    auto now = Clock::now();
    if (step == 0) first = now;
    last = now;
    filled = total;
    input = {r[0].outputs[0].dist.ids[0]};
  }
  engine.page_slots().free(pages);
  return std::chrono::duration<double, std::milli>(last - first).count() / (n - 1);
}

}  // namespace

nlohmann::json run_overhead_bench(const OverheadBenchOptions& o) {
  if (o.model.empty()) fail("pith bench overhead needs -m MODEL");
  if (o.decode_tokens < 2) fail("--decode-tokens must be at least 2");
  const std::string greedy = inferlet_file(o, "greedy_abi");
  const std::string overhead = inferlet_file(o, "overhead");
  const int prompt_tokens = 16, per_instance = 8;

  ServingOptions so = stack_options(o);
  size_kv(so, size_t(o.instances) * (prompt_tokens + per_instance + 32) + 4096);
  ServingStack stack(so);
  const uint32_t vocab = stack.weights().config.vocab_size;
  auto greedy_prog = stack.runtime().load_program_file(greedy);
  auto overhead_prog = stack.runtime().load_program_file(overhead);
  stack.launch(greedy_prog, {"greedy_abi", "--tokens", "1", "--max-tokens", "1"})->wait();  // warm

  // 1. control-layer calls from a guest.
  std::vector<double> control_ns;
  for (int r = 0; r < o.runs; ++r) {
    std::mutex mu;
    std::string msg;
    stack
        .launch(overhead_prog, {"overhead", std::to_string(o.control_calls)},
                [&](uint64_t, const runtime::InstanceEvent& e) {
                  if (e.kind == runtime::InstanceEvent::Kind::Message) {
                    std::lock_guard lock(mu);
                    msg = e.text;
                  }
                })
        ->wait();
    if (msg.rfind("control_ns ", 0) != 0) fail("overhead inferlet: {}", msg);
    control_ns.push_back(std::stod(msg.substr(11)));
  }

  // 2. forward-call overhead at `instances` concurrent inferlets.
  std::vector<double> fwd_us, mean_batch;
  for (int r = 0; r < o.runs; ++r) {
    std::atomic<int64_t> backend_ns{0};
    std::atomic<uint64_t> calls{0}, batches{0};
    stack.controller().set_batch_observer([&](const BatchStats& s) {
      backend_ns += s.backend_ns;
      if (s.type == CallType::Forward) {
        calls += s.calls;
        ++batches;
      }
    });
    auto t0 = Clock::now();
    std::vector<std::shared_ptr<runtime::Instance>> insts;
    for (int i = 0; i < o.instances; ++i)
      insts.push_back(stack.launch(
          greedy_prog, {"greedy_abi", "--tokens", prompt_csv(prompt_tokens, vocab, i + 1),
                        "--max-tokens", std::to_string(per_instance)}));
    for (auto& i : insts) {
      auto st = i->wait();
      if (st.code != 0 || st.kind != runtime::ExitStatus::Kind::Exited)
        fail("overhead bench: instance ended with '{}'", st.reason);
    }
    double wall_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    stack.controller().set_batch_observer(nullptr);
    fwd_us.push_back((wall_ns - double(backend_ns.load())) / double(calls.load()) / 1000.0);
    mean_batch.push_back(batches ? double(calls) / double(batches) : 0);
  }

  // 3. TPOT: one inferlet vs the fused loop, same engine, same prompt, alternating.
  std::vector<int32_t> prompt;
  for (int t = 0; t < prompt_tokens; ++t)
    prompt.push_back(static_cast<int32_t>((t * 104729u + 7919u) % vocab));
  std::string csv;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i) csv.push_back(',');
    csv.append(std::to_string(prompt[i]));
  }
  std::vector<double> tpot_inf, tpot_fused;
  // One untimed fused loop first: right after the concurrent phase the first one ran up to 2x
  // slower (1B Q8_0 on 2 cores: 104 vs 47 ms), which with --runs 1 reversed the comparison.
  fused_tpot_ms(stack.backend(), prompt, o.decode_tokens);
  for (int r = 0; r < o.runs; ++r) {
    tpot_fused.push_back(fused_tpot_ms(stack.backend(), prompt, o.decode_tokens));
    std::mutex mu;
    std::vector<Clock::time_point> arrivals;
    stack
        .launch(greedy_prog,
                {"greedy_abi", "--tokens", csv, "--max-tokens", std::to_string(o.decode_tokens)},
                [&](uint64_t, const runtime::InstanceEvent& e) {
                  if (e.kind != runtime::InstanceEvent::Kind::Message || e.text == "done") return;
                  std::lock_guard lock(mu);
                  arrivals.push_back(Clock::now());
                })
        ->wait();
    if (arrivals.size() < 2)
      fail("overhead bench: the inferlet produced {} tokens", arrivals.size());
    tpot_inf.push_back(
        std::chrono::duration<double, std::milli>(arrivals.back() - arrivals.front()).count() /
        double(arrivals.size() - 1));
  }

  nlohmann::json out;
  out["suite"] = "overhead";
  out["control_call_us"] = median(control_ns) / 1000.0;
  out["forward_call_us"] = median(fwd_us);
  out["instances"] = o.instances;
  out["mean_batch"] = median(mean_batch);
  out["tpot_inferlet_ms"] = median(tpot_inf);
  out["tpot_fused_ms"] = median(tpot_fused);
  out["overhead_pct"] = (median(tpot_inf) / median(tpot_fused) - 1.0) * 100.0;
  fmt::print("overhead on {} ({} runs, medians)\n", o.model, o.runs);
  fmt::print("  control-layer call from a guest: {:.3f} us\n",
             out["control_call_us"].get<double>());
  fmt::print("  forward call overhead at {} inferlets: {:.2f} us per call (mean batch {:.1f})\n",
             o.instances, out["forward_call_us"].get<double>(), out["mean_batch"].get<double>());
  fmt::print("  TPOT: inferlet {:.3f} ms vs fused C++ loop {:.3f} ms: {:+.2f}%\n",
             out["tpot_inferlet_ms"].get<double>(), out["tpot_fused_ms"].get<double>(),
             out["overhead_pct"].get<double>());
  return out;
}

}  // namespace pith::bench
