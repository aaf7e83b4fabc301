// `pith bench soak --server`: the soak's mix through a real `pith serve` (this binary, started as
// a child process on a free loopback port) over HTTP — programs uploaded, instances launched
// and followed on their event streams — with streamed OpenAI chat completions mixed in. The
// child's RSS and threads come from /proc, its instances and KV pages from /metrics.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/inferlet_files.h"
#include "bench/soak_target.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "common/read_file.h"

extern char** environ;

namespace pith::bench {

namespace {

using cli::HttpRequest;
using cli::ServerClient;
using cli::SseEvent;
using nlohmann::json;
using Kind = runtime::ExitStatus::Kind;

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail("soak: cannot find a free port");
  close(fd);
  return ntohs(a.sin_port);
}

// `name{labels} value` lines of a Prometheus text page, by "name{labels}" (or "name").
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    try {
      m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    } catch (const std::exception&) {
    }
  }
  return m;
}

class ServerTarget final : public SoakTarget {
 public:
  ServerTarget(const SoakBenchOptions& o, const std::vector<SoakKind>& kinds)
      : port_(free_port()), client_(fmt::format("http://127.0.0.1:{}", port_), "") {
    log_path_ =
        (std::filesystem::temp_directory_path() / fmt::format("pith-soak-server-{}.log", getpid()))
            .string();
    start(o);
    for (const SoakKind& k : kinds) {
      if (k.name == "openai_stream") continue;
      std::string wasm = read_file(
          find_inferlet(o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir, k.name));
      hashes_[k.name] =
          client_.post_bytes("/v1/programs?name=" + k.name, std::move(wasm), "application/wasm")
              .at("hash")
              .get<std::string>();
    }
    model_ = client_.get("/v1/models").at("data").at(0).at("id").get<std::string>();
    for (const SoakKind& k : kinds) {  // warm: native builds, first pages
      std::string reason;
      if (run_one(k, &reason) != k.expected)
        fail("soak: warm-up {} ended unexpectedly: {}", k.name, reason);
    }
    description_ = fmt::format("model {}, KV pool {}, `pith serve` pid {} on port {} (log {})",
                               o.model, o.kv_memory, pid_, port_, log_path_);
  }

  ~ServerTarget() override {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);  // drains: every instance has ended by now
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  Kind run_one(const SoakKind& k, std::string* reason) override {
    return k.name == "openai_stream" ? chat_stream(reason) : instance(k, reason);
  }

  SoakGauges gauges() override {
    SoakGauges g;
    g.rss_mib = process_rss_mib(pid_);
    g.threads = process_threads(pid_);
    cli::HttpResponse r = client_.perform(cli::http_request("GET", "/metrics"));
    auto m = parse_metrics(r.body);
    g.instances = m["pith_running_instances"];
    g.pages_used = m["pith_kv_pages{state=\"used\"}"];
    g.pages_total = m["pith_kv_pages_total"];
    g.suspended = m["pith_suspended_instances"];
    g.suspensions = m["pith_kv_suspensions_total"];
    return g;
  }

  std::string describe() const override { return description_; }

 private:
  void start(const SoakBenchOptions& o) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::string> args = {self,
                                     "serve",
                                     "-m",
                                     o.model,
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port_),
                                     "--device",
                                     o.device,
                                     "-t",
                                     std::to_string(o.threads),
                                     "--runtime-threads",
                                     std::to_string(o.runtime_threads),
                                     "--kv-memory",
                                     o.kv_memory,
                                     "--inferlet-cpu-limit",
                                     "0.3",  // the spinning guest's end
                                     "--max-instances",
                                     std::to_string(o.instances + 64)};
    if (!o.cache_dir.empty()) args.insert(args.end(), {"--cache-dir", o.cache_dir});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    int rc = posix_spawn(&pid_, self.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) fail("soak: cannot start `pith serve`: {}", std::strerror(rc));
    for (int i = 0; i < 1200; ++i) {  // model load and the built-in inferlet: up to 2 minutes
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        fail("soak: `pith serve` exited during startup (log: {})", log_path_);
      }
      try {
        if (client_.perform(cli::http_request("GET", "/health")).status == 200) return;
      } catch (const Error&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    fail("soak: `pith serve` did not become healthy in 2 minutes (log: {})", log_path_);
  }

  // POST /v1/instances, then its event stream until `terminated` (reconnecting after a drop).
  Kind instance(const SoakKind& k, std::string* reason) {
    json launched =
        client_.post("/v1/instances", {{"program", hashes_.at(k.name)}, {"args", k.args}});
    const std::string id = launched.at("id").get<std::string>();
    std::optional<json> exit;
    std::optional<uint64_t> last;
    for (int attempt = 0; !exit && attempt < 5; ++attempt) {
      HttpRequest r = cli::http_request("GET", "/v1/instances/" + id + "/events");
      if (last) r.headers.push_back(fmt::format("Last-Event-ID: {}", *last));
      r.idle_timeout_s = 60;
      client_.stream(r, [&](const SseEvent& e) {
        if (e.id) last = e.id;
        if (e.event == "terminated") exit = json::parse(e.data, nullptr, false);
        return !exit;
      });
    }
    if (!exit || !exit->is_object())
      fail("instance {}: the event stream ended without a terminated event", id);
    *reason = exit->value("reason", "");
    const std::string kind = exit->value("kind", "");
    return kind == "exited" ? Kind::Exited : kind == "trapped" ? Kind::Trapped : Kind::Killed;
  }

  // A streamed chat completion read to `data: [DONE]`; anything short of that throws.
  Kind chat_stream(std::string* reason) {
    json body = {{"model", model_},
                 {"messages", {{{"role", "user"}, {"content", "Tell me a short story."}}}},
                 {"max_tokens", 32},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    HttpRequest r =
        cli::http_request("POST", "/v1/chat/completions", body.dump(), "application/json");
    r.idle_timeout_s = 60;
    bool done = false, finished = false;
    uint64_t completion_tokens = 0;
    std::string error;
    client_.stream(r, [&](const SseEvent& e) {
      if (e.data == "[DONE]") {
        done = true;
        return false;
      }
      json chunk = json::parse(e.data, nullptr, false);
      if (chunk.is_discarded()) return true;
      if (chunk.contains("error")) error = chunk["error"].dump();
      if (chunk.contains("choices") && !chunk["choices"].empty() &&
          !chunk["choices"][0].value("finish_reason", json()).is_null())
        finished = true;
      if (chunk.contains("usage") && chunk["usage"].is_object())
        completion_tokens = chunk["usage"].value("completion_tokens", uint64_t{0});
      return true;
    });
    if (!error.empty()) fail("chat stream: {}", error);
    if (!done || !finished || completion_tokens == 0)
      fail("chat stream ended early: [DONE] {}, finish_reason {}, {} completion tokens", done,
           finished, completion_tokens);
    *reason = "[DONE]";
    return Kind::Exited;
  }

  uint16_t port_;
  ServerClient client_;
  pid_t pid_ = 0;
  std::string log_path_, model_, description_;
  std::map<std::string, std::string> hashes_;
};

}  // namespace

nlohmann::json run_server_soak(const SoakBenchOptions& o) {
  const std::vector<SoakKind> kinds = soak_kinds(o.openai_share);
  ServerTarget target(o, kinds);
  return run_soak(target, kinds, o);
}

}  // namespace pith::bench
