#include "bench/bench_contention.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "bench/request_driver.h"
#include "common/error.h"
#include "control/controller.h"
#include "engine/model_loader.h"

namespace pith::bench {

namespace {

// What a parked guest does, for a C++ request thread: the controller's waker bumps a counter,
// and a call answered Waiting is made again once the counter moved past what it was before it.
class Parker {
 public:
  std::function<void()> waker() {
    return [this] {
      std::lock_guard lock(mu_);
      ++wakes_;
      cv_.notify_all();
    };
  }
  template <typename Call>
  auto until_ready(Call&& call) -> decltype(call()) {
    for (;;) {
      uint64_t seen = wakes();
      auto r = call();
      if (r.code() != Status::Waiting) return r;
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return wakes_ > seen; });
    }
  }

 private:
  uint64_t wakes() {
    std::lock_guard lock(mu_);
    return wakes_;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t wakes_ = 0;
};

struct Outcome {
  bool ok = false;
  std::vector<int32_t> tokens;  // greedy output
  double seconds = 0;
};

// One greedy completion, allocating a page whenever the context fills one (as the SDK does).
Outcome complete(Controller& ctl, InstanceId id, const std::vector<int32_t>& prompt, int gen,
                 Clock::time_point start) {
  Outcome out;
  const uint32_t ps = ctl.page_size();
  Parker parker;
  ctl.register_instance(id, [](const std::string&) {});  // the kill policy's victims fail below
  ctl.set_waker(id, parker.waker());
  auto queue = ctl.create_queue(id);
  bool ready = queue.ok();
  // Hybrid models: the sequence's recurrent state (suspended with its pages).
  uint32_t state = SequenceInput::kNoState;
  if (ready && ctl.recurrent()) {
    std::vector<uint32_t> st;
    ready = parker.until_ready([&] { return ctl.alloc_states(id, 1, st); }).ok();
    if (ready) state = st.at(0);
  }
  std::vector<uint32_t> pages;
  auto grow_to = [&](size_t slots) {
    const size_t need = (slots + ps - 1) / ps;
    if (need <= pages.size()) return true;
    auto got = parker.until_ready(
        [&] { return ctl.alloc_pages(id, static_cast<uint32_t>(need - pages.size())); });
    if (!got) return false;
    pages.insert(pages.end(), got->begin(), got->end());
    return true;
  };
  auto step = [&](std::vector<int32_t> tokens, size_t first_pos) -> int32_t {
    SequenceInput s;
    s.tokens = std::move(tokens);
    const size_t end = first_pos + s.tokens.size();
    for (size_t i = first_pos; i < end; ++i) s.positions.push_back(static_cast<uint32_t>(i));
    const size_t used = (end + ps - 1) / ps;
    s.kv_pages.assign(pages.begin(), pages.begin() + used);
    s.last_page_len = static_cast<uint32_t>(end - (used - 1) * ps);
    s.outputs.push_back({static_cast<uint32_t>(s.tokens.size() - 1), OutputKind::TopK, 1, 0});
    s.state_slot = state;
    std::promise<CallOutcome> p;
    CallCompletion done = [&p](CallOutcome&& o) { p.set_value(std::move(o)); };
    auto submitted =
        parker.until_ready([&] { return ctl.forward(id, *queue, std::move(s), std::move(done)); });
    if (!submitted) return -1;
    CallOutcome o = p.get_future().get();
    return o ? o->forward.outputs[0].dist.ids[0] : -1;
  };
  if (ready && grow_to(prompt.size())) {
    int32_t next = step(prompt, 0);
    size_t pos = prompt.size();
    while (next >= 0) {
      out.tokens.push_back(next);
      if (static_cast<int>(out.tokens.size()) == gen) {
        out.ok = true;
        break;
      }
      if (!grow_to(pos + 1)) break;
      next = step({next}, pos++);
    }
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ctl.release_instance(id);
  return out;
}

struct RunResult {
  uint32_t pages = 0;
  int completed = 0, identical = 0;
  double seconds = 0, tok_s = 0, p99_s = 0;
  ControllerGauges gauges;
  std::vector<Outcome> outcomes;
};

}  // namespace

nlohmann::json run_contention_bench(const ContentionBenchOptions& o) {
  if (o.model.empty()) fail("pith bench contention needs -m MODEL");
  if (o.requests < 1 || o.prompt_tokens < 1 || o.gen_tokens < 1)
    fail("pith bench contention: requests, prompt and generated tokens must be at least 1");
  auto weights = load_model(o.model, LoadOptions{.quiet = true});
  const auto& cfg = weights->config;
  const uint32_t ps = 16;
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts(o.requests);
  for (auto& p : prompts)
    for (int i = 0; i < o.prompt_tokens; ++i)
      p.push_back(static_cast<int32_t>(rng() % cfg.vocab_size));
  const uint32_t per_request = (o.prompt_tokens + o.gen_tokens + ps - 1) / ps;
  const uint32_t needed = per_request * static_cast<uint32_t>(o.requests);

  auto run = [&](uint32_t pages, KvPressure pressure, Preemption preemption,
                 const RunResult* reference) {
    BackendOptions bo;
    bo.device = o.device;
    bo.n_threads = static_cast<size_t>(o.threads);
    bo.kv_page_size = ps;
    bo.kv_memory_bytes = size_t{pages} * cfg.n_kv_layers() * 2 * ps * cfg.kv_dim() * sizeof(float);
    // Hybrid models: a recurrent state for every request (the pressure is on KV memory; a
    // suspension takes the instance's state out with its pages).
    bo.state_memory_bytes =
        static_cast<size_t>(o.requests) * cfg.recurrent_state_floats() * sizeof(float);
    auto backend = make_backend(weights, bo);
    ControllerOptions co;
    co.kv_pressure = pressure;
    co.preemption = preemption;
    co.prefix_cache = false;  // distinct prompts: nothing to share, nothing to evict
    Controller ctl(*backend, co);
    RunResult r;
    r.pages = backend->page_slots().capacity();
    r.outcomes.resize(o.requests);
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < o.requests; ++i)
      threads.emplace_back([&, i] {
        r.outcomes[i] =
            complete(ctl, static_cast<InstanceId>(i + 1), prompts[i], o.gen_tokens, start);
      });
    for (auto& t : threads) t.join();
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> latencies;
    for (int i = 0; i < o.requests; ++i) {
      const Outcome& out = r.outcomes[i];
      if (!out.ok) continue;
      ++r.completed;
      latencies.push_back(out.seconds);
      if (reference && out.tokens == reference->outcomes[i].tokens) ++r.identical;
    }
    r.tok_s = double(r.completed) * o.gen_tokens / r.seconds;
    r.p99_s = percentile(latencies, 99);
    r.gauges = ctl.gauges();
    return r;
  };

  fmt::print(
      "contention: {} requests x ({} prompt + {} generated tokens) at once, {}-token pages: "
      "{} pages needed together; model {}\n",
      o.requests, o.prompt_tokens, o.gen_tokens, ps, needed, o.model);
  RunResult base = run(needed + 1, KvPressure::Suspend, Preemption::Swap, nullptr);
  base.identical = base.completed;
  fmt::print("  unpressured ({:>5} pages):        {:>3}/{} done, {:9.1f} tok/s, p99 {:7.2f} s\n",
             base.pages, base.completed, o.requests, base.tok_s, base.p99_s);
  nlohmann::json out;
  out["suite"] = "contention";
  out["requests"] = o.requests;
  out["prompt_tokens"] = o.prompt_tokens;
  out["gen_tokens"] = o.gen_tokens;
  out["pages_needed"] = needed;
  out["baseline"] = {{"pages", base.pages},
                     {"completed", base.completed},
                     {"tok_s", base.tok_s},
                     {"p99_s", base.p99_s},
                     {"seconds", base.seconds}};
  out["runs"] = nlohmann::json::array();
  for (double f : o.factors) {
    const uint32_t pages = std::max<uint32_t>(static_cast<uint32_t>(needed / f), per_request + 1);
    // Suspension with each preemption mode, then the paper's kill policy.
    struct Policy {
      const char* name;
      KvPressure pressure;
      Preemption preemption;
    };
    double swap_tok_s = 0;
    for (const Policy& p : {Policy{"swap", KvPressure::Suspend, Preemption::Swap},
                            Policy{"recompute", KvPressure::Suspend, Preemption::Recompute},
                            Policy{"kill", KvPressure::Kill, Preemption::Swap}}) {
      RunResult r = run(pages, p.pressure, p.preemption, &base);
      const bool suspend = p.pressure == KvPressure::Suspend;
      const auto& g = r.gauges;
      if (p.preemption == Preemption::Swap && suspend) swap_tok_s = r.tok_s;
      fmt::print(
          "  {:>4.1f}x ({:>5} pages) {:<9}: {:>3}/{} done ({} identical), {:9.1f} tok/s "
          "({:.2f}x of unpressured), p99 {:7.2f} s; {} suspensions, {} pages and {} states "
          "swapped out and in ({:.3f} s), {} dropped and {} tokens recomputed ({:.3f} s to "
          "resume), {} killed\n",
          double(needed) / r.pages, r.pages, p.name, r.completed, o.requests, r.identical, r.tok_s,
          r.tok_s / base.tok_s, r.p99_s, g.suspensions, g.pages_swapped_out, g.states_swapped_out,
          g.swap_ns / 1e9, g.pages_dropped, g.tokens_recomputed, g.recompute_ns / 1e9,
          g.instances_killed_for_memory);
      if (p.preemption == Preemption::Recompute && swap_tok_s > 0)
        fmt::print("  {:>4.1f}x recompute / swap: {:.2f}x throughput\n", double(needed) / r.pages,
                   r.tok_s / swap_tok_s);
      out["runs"].push_back({{"oversubscription", double(needed) / r.pages},
                             {"pages", r.pages},
                             {"policy", suspend ? "suspend" : "kill"},
                             {"preemption", suspend ? p.name : "none"},
                             {"completed", r.completed},
                             {"identical", r.identical},
                             {"tok_s", r.tok_s},
                             {"throughput_vs_unpressured", r.tok_s / base.tok_s},
                             {"p99_s", r.p99_s},
                             {"seconds", r.seconds},
                             {"suspensions", g.suspensions},
                             {"pages_swapped_out", g.pages_swapped_out},
                             {"pages_swapped_in", g.pages_swapped_in},
                             {"states_swapped_out", g.states_swapped_out},
                             {"states_swapped_in", g.states_swapped_in},
                             {"swap_s", g.swap_ns / 1e9},
                             {"pages_dropped", g.pages_dropped},
                             {"tokens_recomputed", g.tokens_recomputed},
                             {"recompute_s", g.recompute_ns / 1e9},
                             {"kv_wait_s", g.kv_wait_ns / 1e9},
                             {"killed", g.instances_killed_for_memory}});
    }
  }
  return out;
}

}  // namespace pith::bench
