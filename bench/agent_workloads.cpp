#include "bench/agent_workloads.h"

#include <duktape.h>
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "bench/inferlet_files.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "runtime/runtime.h"
#include "server/http_server.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

using nlohmann::json;
namespace asio = server::asio;

// The messages an instance sends, and a wait for the first one.
class Messages {
 public:
  runtime::EventSink sink() {
    return [this](uint64_t, const runtime::InstanceEvent& e) {
      std::lock_guard lock(mu_);
      if (e.kind == runtime::InstanceEvent::Kind::Message)
        messages_.push_back(e.text);
      else if (e.kind == runtime::InstanceEvent::Kind::Exit)
        ended_ = true;
      else
        return;
      cv_.notify_all();
    };
  }
  // The first message, "" if the instance ended without one (a worker of a swarm may only start
  // once its coordinator listens).
  std::string first() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !messages_.empty() || ended_; });
    return messages_.empty() ? std::string() : messages_.front();
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> messages_;
  bool ended_ = false;
};

void wait_ok(const std::shared_ptr<runtime::Instance>& instance, const char* what) {
  const runtime::ExitStatus st = instance->wait();
  if (st.kind != runtime::ExitStatus::Kind::Exited || st.code != 0)
    fail("{} ended with '{}' (exit code {})", what, st.reason, st.code);
}

// One /v1/completions request; returns the generated text.
std::string complete(const cli::ServerClient& llm, const std::string& model,
                     const std::string& prompt, int max_tokens, double temperature, uint64_t seed) {
  json body = {{"model", model}, {"prompt", prompt},           {"max_tokens", max_tokens},
               {"seed", seed},   {"temperature", temperature}, {"ignore_eos", true}};
  return llm.post("/v1/completions", body).at("choices").at(0).at("text").get<std::string>();
}

// ---- react ------------------------------------------------------------------------------------

// The tool the ReAct loops call: POST /tool answers a short JSON string after `delay_ms`, on its
// own I/O thread. Counts the calls it served.
class ToolServer {
 public:
  explicit ToolServer(int delay_ms, std::atomic<uint64_t>& calls)
      : calls_(calls),
        server_(io_, server::HttpLimits{},
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

 private:
  std::atomic<uint64_t>& calls_;
  asio::io_context io_;
  server::HttpServer server_;
  std::thread thread_;
};

class ReactWorkload : public AgentWorkload {
 public:
  explicit ReactWorkload(const AgentsBenchOptions& o)
      : AgentWorkload(o, "agent_react"), tool_(o.tool_ms, actions_) {}
  const char* name() const override { return "react"; }
  std::string describe() const override {
    return fmt::format("ReAct: {} tool calls over HTTP (tool {} ms), {} tokens per step", o_.calls,
                       o_.tool_ms, o_.step_tokens);
  }
  void run_inferlet(ServingStack& stack, int i) override {
    std::string call_at;
    for (int c = 1; c <= o_.calls; ++c)
      call_at += (c > 1 ? "," : "") + std::to_string(c * o_.step_tokens);
    wait_ok(stack.launch(program_, {"agent_react", "--prompt", task(i), "--tool-url", tool_.url(),
                                    "--call-at", call_at, "--max-tokens",
                                    std::to_string((o_.calls + 1) * o_.step_tokens)}),
            "agent_react");
  }
  void run_client(const std::string& url, const std::string& model, int i) override {
    cli::ServerClient llm(url, ""), tool("http://127.0.0.1:" + std::to_string(tool_.port()), "");
    std::string transcript = task(i);
    for (int step = 0; step <= o_.calls; ++step) {
      transcript += complete(llm, model, transcript, o_.step_tokens, 0, 0);
      if (step == o_.calls) break;
      const cli::HttpResponse r = tool.perform(cli::http_request(
          "POST", "/tool", json({{"call", step + 1}, {"query", transcript}}).dump(),
          "application/json"));
      if (r.status != 200) fail("the tool answered HTTP {}", r.status);
      transcript += "\nObservation: " + r.body + "\n";  // what agent_react appends
    }
  }
  uint64_t actions_per_task() const override { return uint64_t(o_.calls); }

 private:
  static std::string task(int i) {
    return fmt::format(
        "Question {}: what is the weather in city number {}, and what should I wear? Thought:", i,
        i * 7 % 31);
  }

  ToolServer tool_;
};

// ---- codeact ----------------------------------------------------------------------------------

// The action of every turn on both sides: a checksum of the thought's text, computed in
// JavaScript ({text}: the thought as a string literal, built the same way on both sides).
constexpr const char* kCodeTemplate =
    "var s = {text}; var h = 0;\n"
    "for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) % 1000003;\n"
    "'checksum ' + h;";

// agent_codeact's {text}: printable ASCII but the quote and the backslash as is, other bytes as
// \xNN.
std::string js_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text)
    out += c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? std::string(1, char(c))
                                                          : fmt::format("\\x{:02x}", c);
  return out + "\"";
}

// Runs `code` in a fresh Duktape heap (the host's libduktape: the engine agent_codeact embeds).
std::string eval_js(const std::string& code) {
  duk_context* js = duk_create_heap_default();
  if (js == nullptr) fail("codeact client: no JavaScript heap");
  const bool failed = duk_peval_lstring(js, code.data(), code.size()) != 0;
  std::string result = duk_safe_to_string(js, -1);
  duk_destroy_heap(js);
  if (failed) fail("codeact client: the action failed: {}", result);
  return result;
}

class CodeActWorkload : public AgentWorkload {
 public:
  explicit CodeActWorkload(const AgentsBenchOptions& o) : AgentWorkload(o, "agent_codeact") {}
  const char* name() const override { return "codeact"; }
  std::string describe() const override {
    return fmt::format("CodeAct: {} turns of thought ({} tokens) + JavaScript action + observation",
                       o_.calls, o_.step_tokens);
  }
  void run_inferlet(ServingStack& stack, int i) override {
    Messages out;
    wait_ok(stack.launch(program_,
                         {"agent_codeact", "--task", task(i), "--turns", std::to_string(o_.calls),
                          "--think-tokens", std::to_string(o_.step_tokens), "--answer-tokens",
                          std::to_string(o_.step_tokens), "--code", kCodeTemplate, "--seed",
                          std::to_string(i)},
                         out.sink()),
            "agent_codeact");
    const std::vector<std::string> messages = out.all();
    if (messages.size() != 2) fail("agent_codeact sent {} messages, not 2", messages.size());
    const json report = json::parse(messages[1]);
    if (report.at("errors").get<int>() != 0)
      fail("agent_codeact: a JavaScript action failed: {}", messages[1]);
    actions_ += report.at("turns").get<uint64_t>();
  }
  void run_client(const std::string& url, const std::string& model, int i) override {
    cli::ServerClient llm(url, "");
    std::string transcript = "You solve tasks by writing JavaScript.\nTask: " + task(i);
    for (int turn = 0; turn < o_.calls; ++turn) {
      transcript += "\nThought:";
      const std::string thought =
          complete(llm, model, transcript, o_.step_tokens, 0.8, uint64_t(i + turn));
      std::string code = kCodeTemplate;
      code.replace(code.find("{text}"), 6, js_string(thought));
      transcript += thought + "\nCode:\n" + code;
      transcript += "\nObservation: " + eval_js(code);
      ++actions_;
    }
    transcript += "\nFinal answer:";
    complete(llm, model, transcript, o_.step_tokens, 0, 0);
  }
  uint64_t actions_per_task() const override { return uint64_t(o_.calls); }

 private:
  static std::string task(int i) {
    return fmt::format("Task {}: compute a checksum of the weather report of city number {}.", i,
                       i * 7 % 31);
  }
};

// ---- swarm ------------------------------------------------------------------------------------

class SwarmWorkload : public AgentWorkload {
 public:
  explicit SwarmWorkload(const AgentsBenchOptions& o) : AgentWorkload(o, "agent_swarm") {}
  const char* name() const override { return "swarm"; }
  std::string describe() const override {
    return fmt::format("Swarm: a pipeline of {} agents adding {} tokens each to a shared document",
                       o_.swarm_size, o_.step_tokens);
  }
  void run_inferlet(ServingStack& stack, int i) override {
    const std::string topic = fmt::format("bench-swarm-{}", i);  // i is unique in the bench
    const std::string workers = std::to_string(o_.swarm_size);
    Messages report;
    auto coordinator = stack.launch(program_,
                                    {"agent_swarm", "--role", "coordinator", "--swarm", topic,
                                     "--workers", workers, "--task", task(i)},
                                    report.sink());
    if (const std::string m = report.first(); m != "listening") {
      wait_ok(coordinator, "agent_swarm coordinator");
      fail("agent_swarm coordinator sent '{}' instead of 'listening'", m);
    }
    std::vector<std::shared_ptr<runtime::Instance>> agents;
    for (int w = 1; w <= o_.swarm_size; ++w)
      agents.push_back(
          stack.launch(program_, {"agent_swarm", "--role", "worker", "--swarm", topic, "--workers",
                                  workers, "--index", std::to_string(w), "--tokens",
                                  std::to_string(o_.step_tokens), "--seed", std::to_string(i)}));
    for (auto& a : agents) wait_ok(a, "agent_swarm worker");
    wait_ok(coordinator, "agent_swarm coordinator");
    const std::vector<std::string> messages = report.all();
    if (messages.size() != 2) fail("agent_swarm coordinator sent {} messages", messages.size());
    const json pipeline = json::parse(messages[1]).at("pipeline");
    actions_ += pipeline.size() - 1;  // the task, then one step per worker
  }
  void run_client(const std::string& url, const std::string& model, int i) override {
    cli::ServerClient llm(url, "");
    std::string document;  // "\nAgent k:" + contribution, for every agent so far
    for (int w = 1; w <= o_.swarm_size; ++w) {
      const std::string prompt =
          fmt::format("You are agent {}. Task:{}{}\nAgent {}:", w, task(i), document, w);
      const std::string text = complete(llm, model, prompt, o_.step_tokens, 0.8, uint64_t(i + w));
      document += fmt::format("\nAgent {}:{}", w, text);
      ++actions_;
    }
  }
  uint64_t actions_per_task() const override { return uint64_t(o_.swarm_size); }

 private:
  static std::string task(int i) {
    return fmt::format("Task {}: write a haiku about city number {}, one line per agent.", i,
                       i * 7 % 31);
  }
};

}  // namespace

void AgentWorkload::load(ServingStack& stack, const std::string& dir) {
  program_ = stack.runtime().load_program_file(find_inferlet(dir, inferlet_));
  // Timed runs must not meet the interpreter while the native build runs in the background.
  if (program_->policy() != runtime::TierPolicy::InterpreterOnly) program_->native();
}

std::unique_ptr<AgentWorkload> make_agent_workload(const std::string& name,
                                                   const AgentsBenchOptions& o) {
  if (name == "react") return std::make_unique<ReactWorkload>(o);
  if (name == "codeact") return std::make_unique<CodeActWorkload>(o);
  if (name == "swarm") return std::make_unique<SwarmWorkload>(o);
  fail("pith bench agents: unknown workload '{}' (react, codeact, swarm)", name);
}

std::vector<std::string> agent_workload_names(const std::vector<std::string>& chosen) {
  const std::vector<std::string> all{"react", "codeact", "swarm"};
  for (const std::string& name : chosen)
    if (std::find(all.begin(), all.end(), name) == all.end())
      fail("pith bench agents: unknown workload '{}' (react, codeact, swarm)", name);
  std::vector<std::string> out;
  for (const std::string& name : all)
    if (chosen.empty() || std::find(chosen.begin(), chosen.end(), name) != chosen.end())
      out.push_back(name);
  return out;
}

}  // namespace pith::bench
