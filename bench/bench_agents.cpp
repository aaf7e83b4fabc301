#include "bench/bench_agents.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "bench/agent_workloads.h"
#include "bench/bench_stack.h"
#include "bench/child_server.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct RunResult {
  double seconds = 0, p50_ms = 0, p99_ms = 0;
  uint64_t actions = 0;
  double forward_tokens = 0, mean_batch = 0;  // per task; the in-process side only
};

void percentiles(std::vector<double> v, RunResult& r) {
  std::sort(v.begin(), v.end());
  r.p50_ms = v[v.size() / 2];
  r.p99_ms = v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

// Runs `agents` closures concurrently (one thread each), timing each and the whole.
template <class F>
RunResult run_concurrently(int agents, F&& one_agent) {
  std::vector<double> latency(static_cast<size_t>(agents));
  std::vector<std::thread> threads;
  std::mutex mu;
  std::string failure;
  const auto t0 = Clock::now();
  for (int i = 0; i < agents; ++i)
    threads.emplace_back([&, i] {
      const auto start = Clock::now();
      try {
        one_agent(i);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failure = e.what();
      }
      latency[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    });
  for (auto& t : threads) t.join();
  if (!failure.empty()) fail("agents bench: {}", failure);
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  percentiles(std::move(latency), r);
  return r;
}

// Every task of the bench gets its own index, so no run finds an earlier run's transcripts in the
// prefix cache (the loops are deterministic: the same index would repeat every token).
class TaskIndices {
 public:
  int take(int n) {  // the first of n fresh indices
    const int first = next_;
    next_ += n;
    return first;
  }

 private:
  int next_ = 0;
};

// The loops inside the server: every workload's inferlets on one in-process stack.
class InferletSide {
 public:
  InferletSide(const AgentsBenchOptions& o, const std::vector<std::unique_ptr<AgentWorkload>>& ws)
      : o_(o) {
    ServingOptions so = bench_serving_options(o.model, o.device, o.threads, o.cache_dir);
    so.runtime.http_allow = {"127.0.0.1"};  // the ReAct tool (a local port chosen at start)
    stack_ = std::make_unique<ServingStack>(so);
    const std::string dir = o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir;
    for (const auto& w : ws) {
      w->load(*stack_, dir);
      // Warm: one untimed concurrent round (native code, KV pages, threads; a single warm agent
      // left the first timed round up to 2x slower).
      const int first = tasks_.take(o.agents);
      run_concurrently(o.agents, [&](int i) { w->run_inferlet(*stack_, first + i); });
    }
  }

  RunResult run(AgentWorkload& w) {
    const uint64_t before = w.actions();
    std::atomic<uint64_t> calls{0}, batches{0}, tokens{0};
    stack_->controller().set_batch_observer([&](const BatchStats& s) {
      if (s.type != CallType::Forward) return;
      calls += s.calls;
      tokens += s.tokens;
      ++batches;
    });
    const int first = tasks_.take(o_.agents);
    RunResult r = run_concurrently(o_.agents, [&](int i) { w.run_inferlet(*stack_, first + i); });
    stack_->controller().set_batch_observer({});
    r.actions = w.actions() - before;
    r.forward_tokens = double(tokens) / o_.agents;
    r.mean_batch = batches ? double(calls) / double(batches) : 0;
    return r;
  }

 private:
  const AgentsBenchOptions& o_;
  std::unique_ptr<ServingStack> stack_;
  TaskIndices tasks_;
};

// The same loops from outside: completions over HTTP from client threads.
class ClientSide {
 public:
  ClientSide(const AgentsBenchOptions& o, const std::vector<std::unique_ptr<AgentWorkload>>& ws)
      : o_(o),
        server_("agents bench",
                {"-m", o.model, "--device", o.device, "-t", std::to_string(o.threads)}) {
    model_ = cli::ServerClient(server_.url(), "").get("/v1/models").at("data").at(0).at("id");
    for (const auto& w : ws) {  // warm, as the inferlet side
      const int first = tasks_.take(o.agents);
      run_concurrently(o.agents, [&](int i) { w->run_client(server_.url(), model_, first + i); });
    }
  }

  RunResult run(AgentWorkload& w) {
    const uint64_t before = w.actions();
    const int first = tasks_.take(o_.agents);
    RunResult r =
        run_concurrently(o_.agents, [&](int i) { w.run_client(server_.url(), model_, first + i); });
    r.actions = w.actions() - before;
    return r;
  }

 private:
  const AgentsBenchOptions& o_;
  ChildServer server_;
  std::string model_;
  TaskIndices tasks_;
};

json run_json(const RunResult& r, int tasks) {
  return {{"tasks_per_s", tasks / r.seconds},
          {"seconds", r.seconds},
          {"latency_p50_ms", r.p50_ms},
          {"latency_p99_ms", r.p99_ms},
          {"actions", r.actions}};
}

RunResult median(std::vector<RunResult> v) {
  std::sort(v.begin(), v.end(),
            [](const RunResult& a, const RunResult& b) { return a.seconds < b.seconds; });
  return v[v.size() / 2];
}

}  // namespace

json run_agents_bench(const AgentsBenchOptions& o) {
  if (o.model.empty()) fail("pith bench agents needs -m MODEL");
  if (o.agents < 1 || o.calls < 1 || o.step_tokens < 1 || o.runs < 1 || o.swarm_size < 1)
    fail(
        "pith bench agents: --agents, --calls, --step-tokens, --swarm-size and --runs must be "
        ">= 1");
  if (o.tool_ms < 0) fail("pith bench agents: --tool-ms must be >= 0, not {}", o.tool_ms);
  std::vector<std::unique_ptr<AgentWorkload>> workloads;
  for (const std::string& name : agent_workload_names(o.workloads))
    workloads.push_back(make_agent_workload(name, o));
  fmt::print("agents: {} concurrent tasks per workload, model {}, device {}, {} run(s)\n", o.agents,
             o.model, o.device, o.runs);
  for (const auto& w : workloads) fmt::print("  {:<8} {}\n", w->name(), w->describe());
  InferletSide inferlet(o, workloads);
  ClientSide client(o, workloads);

  json out;
  out["suite"] = "agents";
  out["model"] = o.model;
  out["device"] = o.device;
  out["agents"] = o.agents;
  out["calls"] = o.calls;
  out["step_tokens"] = o.step_tokens;
  out["tool_ms"] = o.tool_ms;
  out["swarm_size"] = o.swarm_size;
  out["workloads"] = json::array();
  fmt::print("{:<9} {:>14} {:>14} {:>12} {:>12} {:>7} {:>9}\n", "workload", "inferlet task/s",
             "client task/s", "inf. p50 ms", "cli. p50 ms", "ratio", "mean batch");
  double log_sum = 0;
  for (const auto& w : workloads) {
    std::vector<RunResult> in_runs, cl_runs;
    for (int r = 0; r < o.runs; ++r) {  // alternated
      in_runs.push_back(inferlet.run(*w));
      cl_runs.push_back(client.run(*w));
    }
    const RunResult a = median(in_runs), b = median(cl_runs);
    const uint64_t want = uint64_t(o.agents) * w->actions_per_task();
    if (a.actions != want || b.actions != want)
      fail("agents bench, {}: {} and {} actions, expected {} each", w->name(), a.actions, b.actions,
           want);
    const double ratio = b.seconds / a.seconds;
    log_sum += std::log(ratio);
    fmt::print("{:<9} {:>14.2f} {:>14.2f} {:>12.1f} {:>12.1f} {:>6.2f}x {:>9.1f}\n", w->name(),
               o.agents / a.seconds, o.agents / b.seconds, a.p50_ms, b.p50_ms, ratio, a.mean_batch);
    json row = {{"workload", w->name()},
                {"describe", w->describe()},
                {"inferlet", run_json(a, o.agents)},
                {"client", run_json(b, o.agents)},
                {"ratio", ratio}};
    row["inferlet"]["forward_tokens_per_task"] = a.forward_tokens;
    row["inferlet"]["mean_batch"] = a.mean_batch;
    out["workloads"].push_back(row);
  }
  const double geomean = std::exp(log_sum / double(workloads.size()));
  fmt::print(
      "inferlet vs client-driven loop: {:.2f}x tasks/s (geometric mean over {} workload(s))\n",
      geomean, workloads.size());
  out["ratio"] = geomean;
  return out;
}

}  // namespace pith::bench
