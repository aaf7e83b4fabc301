// The `pith` commands that talk to a running `pith serve` over its HTTP API
// (docs/server-api.md), all with --server URL (env PITH_SERVER, default http://127.0.0.1:8080)
// and --api-key KEY (env PITH_API_KEY):
//
//   pith run PROGRAM.wasm|PROGRAM.cpp [--detach] -- ARGS   (without -m; see cmd_run.cpp)
//       builds a .cpp first, uploads the module unless the server already has its SHA-256,
//       launches it and follows its events: send() messages to stdout (one per line), logs to
//       stderr, stdin lines forwarded as messages (EOF closes the inbox). Exits with the
//       instance's code, or 1 with the reason when it trapped or was killed. SIGINT/SIGTERM kill
//       the instance before the CLI exits. --detach prints the instance id and returns at once.
//   pith ps [-a] [--json]        instances (running; -a also finished ones)
//   pith kill ID...              terminates instances
//   pith programs [--json]       uploaded programs
//   pith complete "PROMPT" [--chat] [--stream] [--max-tokens N] [--temperature T] ...
//       one request on the OpenAI-compatible endpoints; the text goes to stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "common/read_file.h"
#include "runtime/inferlet_builder.h"
#include "runtime/native_compiler.h"

namespace pith::cli {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct ServerArgs {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  ServerClient client() const { return ServerClient(url, api_key); }
};

void add_server_options(CLI::App* cmd, ServerArgs& s) {
  cmd->add_option("--server", s.url, "pith server URL (default http://127.0.0.1:8080)")
      ->envname("PITH_SERVER");
  cmd->add_option("--api-key", s.api_key, "API key, sent as a Bearer token")
      ->envname("PITH_API_KEY");
}

// ---------------------------------------------------------------- signals

// Set by SIGINT/SIGTERM while `pith run` follows an instance (lock-free atomics are
// async-signal-safe).
std::atomic<int> g_last_signal{0};
std::atomic<int> g_signal_count{0};

void on_stop_signal(int sig) {
  g_last_signal.store(sig);
  g_signal_count.fetch_add(1);
}

// Installs the handlers for its lifetime. SA_RESTART: the stdin forwarder's blocking read must
// not see EINTR as end of input.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// ---------------------------------------------------------------- pith run (remote)

bool is_cpp_source(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  return ext == ".cpp" || ext == ".cc" || ext == ".cxx";
}

// The module's bytes; a C++ source is compiled first, exactly as `pith inferlet build` does.
std::string program_bytes(const std::string& program, bool verbose) {
  if (!is_cpp_source(program)) return read_file(program);
  char tmpl[] = "/tmp/pith-run-XXXXXX";
  if (!mkdtemp(tmpl)) fail("cannot create a temporary directory for building {}", program);
  const fs::path dir = tmpl;
  runtime::InferletBuildOptions b;
  b.sources = {program};
  b.output = (dir / (fs::path(program).stem().string() + ".wasm")).string();
  std::string wasm;
  try {
    runtime::build_inferlet(b);
    wasm = read_file(b.output);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (verbose) fmt::print(stderr, "pith: built {} ({} bytes)\n", program, wasm.size());
  return wasm;
}

struct RemoteRunArgs {
  ServerArgs server;
  bool detach = false;
};

// Forwards stdin lines as messages, then closes the inbox at EOF. Detached: the process may
// exit while it waits for input.
void forward_stdin(const ServerClient& client, const std::string& base) {
  std::thread([client, base] {
    std::string line;
    try {
      while (std::getline(std::cin, line))
        client.post_bytes(base + "/messages", line, "application/octet-stream");
      client.post_bytes(base + "/close", "", "");
    } catch (const ServerError& e) {
      // 409: the instance finished or closed its inbox; nothing more to deliver.
      if (e.status() != 409 && e.status() != 404)
        fmt::print(stderr, "pith: cannot forward stdin: {}\n", e.what());
    } catch (const std::exception& e) {
      fmt::print(stderr, "pith: cannot forward stdin: {}\n", e.what());
    }
  }).detach();
}

// Follows an instance's event stream to its end, printing as it goes.
class EventFollower {
 public:
  EventFollower(const ServerClient& client, std::string id)
      : client_(client), base_("/v1/instances/" + std::move(id)) {}

  // Reads until the `terminated` event, reconnecting (Last-Event-ID) when the connection
  // drops. Returns false if `cancelled` fired first.
  bool follow(const std::function<bool()>& cancelled) {
    int failures = 0;
    while (!exit_) {
      HttpRequest r = http_request("GET", base_ + "/events");
      if (last_id_) r.headers.push_back(fmt::format("Last-Event-ID: {}", *last_id_));
      r.idle_timeout_s = 30;  // the server sends a keep-alive every 2 s
      ServerClient::StreamEnd end = ServerClient::StreamEnd::Closed;
      const std::optional<uint64_t> before = last_id_;
      try {
        end = client_.stream(
            r, [this](const SseEvent& e) { return on_event(e); }, cancelled);
      } catch (const ServerError&) {
        throw;
      } catch (const Error& e) {
        // The server drops a non-detached instance 5 s after its last stream: retry quickly.
        if (exit_) break;
        if (last_id_ != before) failures = 0;  // it made progress: a new outage
        if (++failures > 5) throw;
        fmt::print(stderr, "pith: event stream lost ({}), reconnecting\n", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(200 * failures));
        continue;
      }
      if (end == ServerClient::StreamEnd::Cancelled) return false;
      if (!exit_ && ++failures > 5)
        fail("the event stream of {} keeps ending without a terminated event", base_);
    }
    return true;
  }

  const std::optional<json>& exit() const { return exit_; }

 private:
  bool on_event(const SseEvent& e) {
    if (e.id) last_id_ = e.id;
    json d = json::parse(e.data, nullptr, false);
    if (d.is_discarded() || !d.is_object()) {
      fmt::print(stderr, "pith: unreadable {} event: {:.200}\n", e.event, e.data);
      return true;
    }
    if (e.event == "message") {
      fmt::print("{}\n", d.value("text", ""));
      std::fflush(stdout);
    } else if (e.event == "log") {
      fmt::print(stderr, "[{}] {}\n", d.value("level", "info"), d.value("text", ""));
    } else if (e.event == "dropped") {
      fmt::print(stderr, "pith: {} earlier events were dropped by the server's buffer\n",
                 d.value("count", 0));
    } else if (e.event == "terminated") {
      exit_ = d;
    }
    return true;
  }

  ServerClient client_;
  std::string base_;
  std::optional<uint64_t> last_id_;
  std::optional<json> exit_;
};

// The process exit code for a `terminated` event, with the reason on stderr unless it exited.
int exit_code_of(const json& t, const std::string& program) {
  if (t.value("kind", "") == "exited") return t.value("code", 1);
  fmt::print(stderr, "pith: {}: {}\n", program, t.value("reason", t.dump()));
  return 1;
}

int run_remote(const RemoteRunArgs& a, const std::string& program,
               const std::vector<std::string>& args, bool no_stdin, bool verbose) {
  ServerClient client = a.server.client();
  std::string wasm = program_bytes(program, verbose);
  const std::string hash = runtime::sha256_hex(wasm);
  if (client.exists("/v1/programs/" + hash)) {
    if (verbose)
      fmt::print(stderr, "pith: program {} is already on {}\n", hash.substr(0, 12), client.url());
  } else {
    // The file's stem names the program on the server (argv[0], `pith ps`).
    std::string name;
    for (unsigned char c : std::filesystem::path(program).stem().string())
      name += std::isalnum(c) || c == '-' || c == '_' || c == '.' ? std::string(1, char(c))
                                                                  : fmt::format("%{:02X}", c);
    json up = client.post_bytes("/v1/programs?name=" + name, std::move(wasm), "application/wasm");
    if (up.value("hash", "") != hash)
      fail("the server stored the upload as {}, expected SHA-256 {}", up.value("hash", "?"), hash);
    if (verbose) fmt::print(stderr, "pith: uploaded {} as {}\n", program, hash.substr(0, 12));
  }
  // Installed before the launch: a signal from here on reaches the kill path below.
  std::optional<StopSignals> signals;
  if (!a.detach) signals.emplace();
  json launched =
      client.post("/v1/instances", {{"program", hash}, {"args", args}, {"detach", a.detach}});
  const std::string id = launched.at("id").get<std::string>();
  if (a.detach) {
    fmt::print("{}\n", id);
    return 0;
  }
  if (verbose) fmt::print(stderr, "pith: instance {} of {} launched\n", id, program);

  const std::string base = "/v1/instances/" + id;
  if (no_stdin)
    client.post_bytes(base + "/close", "", "");
  else
    forward_stdin(client, base);

  EventFollower follower(client, id);
  if (follower.follow([] { return g_signal_count.load() > 0; }))
    return exit_code_of(*follower.exit(), program);

  // Interrupted: the instance must not outlive a non-detached CLI.
  const int sig = g_last_signal.load();
  fmt::print(stderr, "pith: {} received: killing instance {}\n",
             sig == SIGTERM ? "SIGTERM" : "SIGINT", id);
  try {
    client.del(base);
    // Show its last events and confirm the end, unless a second signal says not to wait.
    const int seen = g_signal_count.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    follower.follow([seen, deadline] {
      return g_signal_count.load() > seen || std::chrono::steady_clock::now() > deadline;
    });
    if (follower.exit())
      fmt::print(stderr, "pith: {}: {}\n", program, follower.exit()->value("reason", "ended"));
  } catch (const std::exception& e) {
    fmt::print(stderr, "pith: could not kill instance {}: {}\n", id, e.what());
  }
  return 128 + (sig ? sig : SIGINT);
}

// ---------------------------------------------------------------- ps, kill, programs

std::string human_age(double s) {
  auto n = static_cast<long>(s);
  if (n < 60) return fmt::format("{}s", n);
  if (n < 3600) return fmt::format("{}m{:02}s", n / 60, n % 60);
  if (n < 86400) return fmt::format("{}h{:02}m", n / 3600, n % 3600 / 60);
  return fmt::format("{}d{:02}h", n / 86400, n % 86400 / 3600);
}

std::string human_size(double bytes) {
  if (bytes < 1024) return fmt::format("{}B", static_cast<long>(bytes));
  if (bytes < 1048576) return fmt::format("{:.1f}K", bytes / 1024);
  return fmt::format("{:.1f}M", bytes / 1048576);
}

// A text table: columns padded to their widest cell, the last one left ragged.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i)
      line += i + 1 < r.size() ? fmt::format("{:<{}}  ", r[i], width[i]) : r[i];
    fmt::print("{}\n", line);
  }
}

struct PsArgs {
  ServerArgs server;
  bool all = false;
  bool as_json = false;
};

void ps(const PsArgs& a) {
  json list = a.server.client().get("/v1/instances").at("instances");
  if (!a.all) {
    json running = json::array();
    for (const auto& i : list)
      if (i.value("state", "") == "running") running.push_back(i);
    list = running;
  }
  if (a.as_json) {
    fmt::print("{}\n", list.dump(2));
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "PROGRAM", "STATE", "AGE", "KV PAGES", "ARGS"}};
  for (const auto& i : list) {
    std::string program = i.contains("program_name") ? i["program_name"].get<std::string>()
                                                     : i.value("program", "").substr(0, 12);
    std::string state = i.value("state", "?");
    if (const auto& e = i.value("exit", json()); e.is_object()) {
      state = e.value("kind", "finished");
      if (state == "exited") state += fmt::format("({})", e.value("code", 0));
    }
    std::string args;
    for (const auto& x : i.value("args", json::array()))
      args += (args.empty() ? "" : " ") + x.get<std::string>();
    if (args.size() > 40) args = args.substr(0, 37) + "...";
    rows.push_back({i.value("id", "?"), program, state, human_age(i.value("age_s", 0.0)),
                    std::to_string(i.value("kv_pages", 0)), args});
  }
  print_table(rows);
}

struct KillArgs {
  ServerArgs server;
  std::vector<std::string> ids;
};

int kill_instances(const KillArgs& a) {
  ServerClient client = a.server.client();
  int failed = 0;
  for (const auto& id : a.ids) {
    try {
      client.del("/v1/instances/" + id);
      fmt::print("{}\n", id);
    } catch (const ServerError& e) {
      fmt::print(stderr, "pith: kill {}: {}\n", id, e.what());
      ++failed;
    }
  }
  return failed ? 1 : 0;
}

struct ProgramsArgs {
  ServerArgs server;
  bool as_json = false;
};

void programs(const ProgramsArgs& a) {
  json list = a.server.client().get("/v1/programs").at("programs");
  if (a.as_json) {
    fmt::print("{}\n", list.dump(2));
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"HASH", "SIZE", "NATIVE", "UPLOADED", "NAME"}};
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& p : list) {
    std::string name = p.value("name", "");
    if (p.value("builtin", false)) name += " (built-in)";
    rows.push_back({p.value("hash", "?"), human_size(p.value("size", 0.0)),
                    p.value("native_ready", false) ? "yes" : "no",
                    human_age(std::max(0.0, now - p.value("uploaded_at", now))) + " ago", name});
  }
  print_table(rows);
}

// ---------------------------------------------------------------- complete

struct CompleteArgs {
  ServerArgs server;
  std::string prompt;
  bool chat = false;
  bool stream = false;
  bool usage = false;
  std::string system;
  std::string model;
  uint32_t max_tokens = 64;
  double temperature = 0;
  double top_p = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  CLI::Option* temperature_opt = nullptr;
  CLI::Option* top_p_opt = nullptr;
  CLI::Option* seed_opt = nullptr;
};

void print_usage(const json& u) {
  if (!u.is_object()) return;
  int cached = 0;
  if (auto d = u.value("prompt_tokens_details", json()); d.is_object())
    cached = d.value("cached_tokens", 0);
  fmt::print(stderr, "usage: {} prompt tokens ({} cached), {} completion tokens\n",
             u.value("prompt_tokens", 0), cached, u.value("completion_tokens", 0));
}

void complete(const CompleteArgs& a) {
  json req = {{"max_tokens", a.max_tokens}, {"stream", a.stream}};
  if (a.chat) {
    json messages = json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
    messages.push_back({{"role", "user"}, {"content", a.prompt}});
    req["messages"] = messages;
  } else {
    req["prompt"] = a.prompt;
  }
  if (!a.model.empty()) req["model"] = a.model;
  if (a.temperature_opt->count()) req["temperature"] = a.temperature;
  if (a.top_p_opt->count()) req["top_p"] = a.top_p;
  if (a.seed_opt->count()) req["seed"] = a.seed;
  if (!a.stop.empty()) req["stop"] = a.stop;
  if (a.stream && a.usage) req["stream_options"] = {{"include_usage", true}};
  const std::string path = a.chat ? "/v1/chat/completions" : "/v1/completions";
  ServerClient client = a.server.client();

  if (!a.stream) {
    json r = client.post(path, req);
    const json& choice = r.at("choices").at(0);
    fmt::print("{}\n",
               a.chat ? choice.at("message").value("content", "") : choice.value("text", ""));
    if (a.usage) print_usage(r.value("usage", json()));
    return;
  }
  bool done = false;
  std::optional<std::string> failure;
  json usage;
  client.stream(http_request("POST", path, req.dump(), "application/json"), [&](const SseEvent& e) {
    if (e.data == "[DONE]") {
      done = true;
      return false;
    }
    json c = json::parse(e.data, nullptr, false);
    if (c.is_discarded()) fail("the server streamed a chunk that is not JSON: {:.200}", e.data);
    if (c.contains("error")) {
      failure = c["error"].value("message", c.dump());
      return true;
    }
    if (c.contains("usage") && c["usage"].is_object()) usage = c["usage"];
    for (const auto& ch : c.value("choices", json::array())) {
      const json piece = a.chat ? ch.value("delta", json::object()).value("content", json())
                                : ch.value("text", json());
      if (piece.is_string()) fmt::print("{}", piece.get<std::string>());
    }
    std::fflush(stdout);
    return true;
  });
  fmt::print("\n");
  if (failure) fail("the completion failed: {}", *failure);
  if (!done) fail("the stream ended without [DONE]");
  if (a.usage) print_usage(usage);
}

// CLI11 maps a callback's non-zero code to the process exit code through this exception.
void exit_with(int code) {
  std::fflush(stdout);
  if (code != 0) throw CLI::RuntimeError(code);
}

}  // namespace

RemoteRun add_remote_run_options(CLI::App& run_cmd) {
  auto a = std::make_shared<RemoteRunArgs>();
  add_server_options(&run_cmd, a->server);
  run_cmd.add_flag("-d,--detach", a->detach,
                   "without -m: print the instance id and leave it running on the server");
  return [a](const std::string& program, const std::vector<std::string>& args, bool no_stdin,
             bool verbose) { return run_remote(*a, program, args, no_stdin, verbose); };
}

void add_client_commands(CLI::App& app) {
  auto ps_args = std::make_shared<PsArgs>();
  auto* ps_cmd = app.add_subcommand("ps", "List the instances on a pith server");
  add_server_options(ps_cmd, ps_args->server);
  ps_cmd->add_flag("-a,--all", ps_args->all, "also finished instances (kept 10 minutes)");
  ps_cmd->add_flag("--json", ps_args->as_json, "print the server's JSON list");
  ps_cmd->callback([ps_args] { ps(*ps_args); });

  auto kill_args = std::make_shared<KillArgs>();
  auto* kill_cmd = app.add_subcommand("kill", "Terminate instances on a pith server");
  add_server_options(kill_cmd, kill_args->server);
  kill_cmd->add_option("ids", kill_args->ids, "instance ids")->required();
  kill_cmd->callback([kill_args] { exit_with(kill_instances(*kill_args)); });

  auto prog_args = std::make_shared<ProgramsArgs>();
  auto* prog_cmd = app.add_subcommand("programs", "List the programs uploaded to a pith server");
  add_server_options(prog_cmd, prog_args->server);
  prog_cmd->add_flag("--json", prog_args->as_json, "print the server's JSON list");
  prog_cmd->callback([prog_args] { programs(*prog_args); });

  auto c = std::make_shared<CompleteArgs>();
  auto* complete_cmd = app.add_subcommand(
      "complete", "One completion through a pith server's OpenAI-compatible API");
  add_server_options(complete_cmd, c->server);
  complete_cmd->add_option("prompt", c->prompt, "the prompt (with --chat: the user message)")
      ->required();
  complete_cmd->add_flag("--chat", c->chat, "use /v1/chat/completions (the model's chat template)");
  complete_cmd->add_flag("--stream", c->stream, "print tokens as they are generated");
  complete_cmd->add_flag("--usage", c->usage, "print token usage on stderr");
  complete_cmd->add_option("--system", c->system, "with --chat: a system message first");
  complete_cmd->add_option("--model", c->model, "model name (default: the server's)");
  complete_cmd->add_option("--max-tokens", c->max_tokens,
                           "tokens to generate at most (default 64)");
  c->temperature_opt =
      complete_cmd->add_option("--temperature", c->temperature, "sampling temperature");
  c->top_p_opt = complete_cmd->add_option("--top-p", c->top_p, "nucleus sampling mass");
  c->seed_opt = complete_cmd->add_option("--seed", c->seed, "sampling seed");
  complete_cmd->add_option("--stop", c->stop, "stop sequence (repeatable)")
      ->allow_extra_args(false);
  complete_cmd->callback([c] { complete(*c); });
}

}  // namespace pith::cli
