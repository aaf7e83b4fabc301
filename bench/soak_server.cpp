// `pith bench soak --server`: the soak's mix through a real `pith serve` (this binary, started as
// a child process on a free loopback port) over HTTP — programs uploaded, instances launched
// and followed on their event streams — with streamed OpenAI chat completions mixed in. The
// child's RSS and threads come from /proc, its instances and KV pages from /metrics.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <sstream>

#include "bench/child_server.h"
#include "bench/inferlet_files.h"
#include "bench/soak_target.h"
#include "cli/server_client.h"
#include "common/error.h"
#include "common/read_file.h"

namespace pith::bench {

namespace {

using cli::HttpRequest;
using cli::ServerClient;
using cli::SseEvent;
using nlohmann::json;
using Kind = runtime::ExitStatus::Kind;

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
      : server_("soak", serve_args(o)), client_(server_.url(), "") {
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
    description_ =
        fmt::format("model {}, KV pool {}, `pith serve` pid {} on port {} (log {})", o.model,
                    o.kv_memory, server_.pid(), server_.port(), server_.log_path());
  }

  Kind run_one(const SoakKind& k, std::string* reason) override {
    return k.name == "openai_stream" ? chat_stream(reason) : instance(k, reason);
  }

  SoakGauges gauges() override {
    SoakGauges g;
    g.rss_mib = process_rss_mib(server_.pid());
    g.threads = process_threads(server_.pid());
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
  static std::vector<std::string> serve_args(const SoakBenchOptions& o) {
    std::vector<std::string> args = {"-m",
                                     o.model,
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
    return args;
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

  ChildServer server_;
  ServerClient client_;
  std::string model_, description_;
  std::map<std::string, std::string> hashes_;
};

}  // namespace

nlohmann::json run_server_soak(const SoakBenchOptions& o) {
  const std::vector<SoakKind> kinds = soak_kinds(o.openai_share);
  ServerTarget target(o, kinds);
  return run_soak(target, kinds, o);
}

}  // namespace pith::bench
