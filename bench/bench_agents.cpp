#include "bench/bench_agents.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bench/bench_stack.h"
#include "bench/child_server.h"
#include "bench/inferlet_files.h"
#include "bench/machine_baselines.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "server/http_server.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace asio = server::asio;

// The tool both loops call: POST /tool answers a short JSON string after `delay_ms`, on its own
// I/O thread. Counts the calls it served.
class ToolServer {
 public:
  explicit ToolServer(int delay_ms)
      : server_(io_, server::HttpLimits{},
                [this, delay_ms](server::HttpExchange& ex) -> asio::awaitable<void> {
                  if (delay_ms > 0) {
                    asio::steady_timer t(co_await asio::this_coro::executor,
                                         std::chrono::milliseconds(delay_ms));
                    co_await t.async_wait(asio::use_awaitable);
                  }
                  const uint64_t n = ++calls_;
                  co_await ex.respond(server::http::status::ok,
                                      json(fmt::format("sunny, 21 C (answer {})", n % 100)).dump(),
                                      "application/json");
                }) {
    server_.listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ToolServer() {
    server_.stop_accepting();
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return server_.port(); }
  std::string url() const { return fmt::format("http://127.0.0.1:{}/tool", port()); }
  uint64_t calls() const { return calls_; }

 private:
  asio::io_context io_;
  server::HttpServer server_;
  std::atomic<uint64_t> calls_{0};
  std::thread thread_;
};

std::string task(int i) {
  return fmt::format(
      "Question {}: what is the weather in city number {}, and what should I wear? "
      "Thought:",
      i, i * 7 % 31);
}

struct RunResult {
  double seconds = 0, p50_ms = 0, p99_ms = 0;
  uint64_t tool_calls = 0;
  double forward_tokens = 0, mean_batch = 0;  // per agent; the in-process side only
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

// The loop inside the server: agent_react instances on an in-process stack.
class InferletSide {
 public:
  InferletSide(const AgentsBenchOptions& o, const ToolServer& tool) : o_(o), tool_(tool) {
    ServingOptions so = bench_serving_options(o.model, o.device, o.threads, o.cache_dir);
    so.runtime.http_allow = {fmt::format("127.0.0.1:{}", tool.port())};
    stack_ = std::make_unique<ServingStack>(so);
    const std::string dir = o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir;
    program_ = stack_->runtime().load_program_file(find_inferlet(dir, "agent_react"));
    if (program_->policy() != runtime::TierPolicy::InterpreterOnly) program_->native();
    // Warm: one untimed concurrent round (native code, KV pages, threads; a single warm agent
    // left the first timed round up to 2x slower).
    run_concurrently(o.agents, [&](int i) { run_agent(o.agents + i); });
  }

  RunResult run() {
    const uint64_t before = tool_.calls();
    std::atomic<uint64_t> calls{0}, batches{0}, tokens{0};
    stack_->controller().set_batch_observer([&](const BatchStats& s) {
      if (s.type != CallType::Forward) return;
      calls += s.calls;
      tokens += s.tokens;
      ++batches;
    });
    RunResult r = run_concurrently(o_.agents, [&](int i) { run_agent(i); });
    stack_->controller().set_batch_observer({});
    r.tool_calls = tool_.calls() - before;
    r.forward_tokens = double(tokens) / o_.agents;
    r.mean_batch = batches ? double(calls) / double(batches) : 0;
    return r;
  }

 private:
  void run_agent(int i) {
    std::string call_at;
    for (int c = 1; c <= o_.calls; ++c)
      call_at += (c > 1 ? "," : "") + std::to_string(c * o_.step_tokens);
    auto st = stack_
                  ->launch(program_, {"agent_react", "--prompt", task(i), "--tool-url", tool_.url(),
                                      "--call-at", call_at, "--max-tokens",
                                      std::to_string((o_.calls + 1) * o_.step_tokens)})
                  ->wait();
    if (st.kind != runtime::ExitStatus::Kind::Exited || st.code != 0)
      fail("agent_react ended with '{}'", st.reason);
  }

  const AgentsBenchOptions& o_;
  const ToolServer& tool_;
  std::unique_ptr<ServingStack> stack_;
  std::shared_ptr<runtime::Program> program_;
};

// The same loop from outside: completions over HTTP, the tool called by the client.
class ClientSide {
 public:
  ClientSide(const AgentsBenchOptions& o, const ToolServer& tool)
      : o_(o),
        tool_(tool),
        server_("agents bench",
                {"-m", o.model, "--device", o.device, "-t", std::to_string(o.threads)}) {
    model_ = cli::ServerClient(server_.url(), "").get("/v1/models").at("data").at(0).at("id");
    // Warm: one untimed concurrent round (native code, KV pages, threads; a single warm agent
    // left the first timed round up to 2x slower).
    run_concurrently(o.agents, [&](int i) { run_agent(o.agents + i); });
  }

  RunResult run() {
    const uint64_t before = tool_.calls();
    RunResult r = run_concurrently(o_.agents, [&](int i) { run_agent(i); });
    r.tool_calls = tool_.calls() - before;
    return r;
  }

 private:
  void run_agent(int i) const {
    cli::ServerClient llm(server_.url(), ""),
        tool("http://127.0.0.1:" + std::to_string(tool_.port()), "");
    std::string transcript = task(i);
    for (int step = 0; step <= o_.calls; ++step) {
      json body = {{"model", model_},
                   {"prompt", transcript},
                   {"max_tokens", o_.step_tokens},
                   {"temperature", 0},
                   {"ignore_eos", true}};
      transcript +=
          llm.post("/v1/completions", body).at("choices").at(0).at("text").get<std::string>();
      if (step == o_.calls) break;
      const cli::HttpResponse r = tool.perform(cli::http_request(
          "POST", "/tool", json({{"call", step + 1}, {"query", transcript}}).dump(),
          "application/json"));
      if (r.status != 200) fail("the tool answered HTTP {}", r.status);
      transcript += "\nObservation: " + r.body + "\n";  // what agent_react appends
    }
  }

  const AgentsBenchOptions& o_;
  const ToolServer& tool_;
  ChildServer server_;
  std::string model_;
};

json run_json(const RunResult& r, int agents) {
  return {{"agents_per_s", agents / r.seconds},
          {"seconds", r.seconds},
          {"latency_p50_ms", r.p50_ms},
          {"latency_p99_ms", r.p99_ms},
          {"tool_calls", r.tool_calls}};
}

}  // namespace

json run_agents_bench(const AgentsBenchOptions& o) {
  if (o.model.empty()) fail("pith bench agents needs -m MODEL");
  if (o.agents < 1 || o.calls < 1 || o.step_tokens < 1 || o.runs < 1)
    fail("pith bench agents: --agents, --calls, --step-tokens and --runs must be >= 1");
  if (o.tool_ms < 0) fail("pith bench agents: --tool-ms must be >= 0, not {}", o.tool_ms);
  fmt::print(
      "agents: {} concurrent ReAct agents x {} tool calls ({} tokens per step, tool {} ms), "
      "model {}, device {}, {} run(s)\n",
      o.agents, o.calls, o.step_tokens, o.tool_ms, o.model, o.device, o.runs);
  ToolServer tool(o.tool_ms);
  InferletSide inferlet(o, tool);
  ClientSide client(o, tool);
  std::vector<RunResult> in_runs, cl_runs;
  for (int r = 0; r < o.runs; ++r) {  // alternated
    in_runs.push_back(inferlet.run());
    cl_runs.push_back(client.run());
  }
  auto med = [](std::vector<RunResult> v) {
    std::sort(v.begin(), v.end(),
              [](const RunResult& a, const RunResult& b) { return a.seconds < b.seconds; });
    return v[v.size() / 2];
  };
  const RunResult a = med(in_runs), b = med(cl_runs);
  const uint64_t want = uint64_t(o.agents) * o.calls;
  if (a.tool_calls != want || b.tool_calls != want)
    fail("agents bench: {} and {} tool calls, expected {} each", a.tool_calls, b.tool_calls, want);
  fmt::print("{:<26} {:>10} {:>10} {:>10}\n", "loop", "agents/s", "p50 ms", "p99 ms");
  fmt::print("{:<26} {:>10.2f} {:>10.1f} {:>10.1f}\n", "inferlet (agent_react)",
             o.agents / a.seconds, a.p50_ms, a.p99_ms);
  fmt::print("{:<26} {:>10.2f} {:>10.1f} {:>10.1f}\n", "client over the OpenAI API",
             o.agents / b.seconds, b.p50_ms, b.p99_ms);
  const double ratio = b.seconds / a.seconds;
  fmt::print(
      "inferlet vs client-driven loop: {:.2f}x agents/s (inferlet side: {:.0f} forward "
      "tokens per agent, mean batch {:.1f})\n",
      ratio, a.forward_tokens, a.mean_batch);
  json out;
  out["suite"] = "agents";
  out["model"] = o.model;
  out["device"] = o.device;
  out["agents"] = o.agents;
  out["calls"] = o.calls;
  out["step_tokens"] = o.step_tokens;
  out["tool_ms"] = o.tool_ms;
  out["inferlet"] = run_json(a, o.agents);
  out["inferlet"]["forward_tokens_per_agent"] = a.forward_tokens;
  out["inferlet"]["mean_batch"] = a.mean_batch;
  out["client"] = run_json(b, o.agents);
  out["ratio"] = ratio;
  return out;
}

}  // namespace pith::bench
