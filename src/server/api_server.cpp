#include "server/api_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/byte_size.h"
#include "common/error.h"
#include "server/builtin_programs.h"
#include "server/openai_api.h"
#include "server/serving_stack.h"
#include "tokenizer/chat_template.h"

namespace pith::server {

using asio::use_awaitable;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kCompletionProgram = "openai_completion";

// Used when the model carries no chat template: Llama 3's header/eot layout.
constexpr const char* kFallbackChatTemplate =
    "{{- bos_token if bos_token is defined else '' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

std::string json_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* level_name(int level) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  return names[level & 3];
}

const char* exit_kind(runtime::ExitStatus::Kind k) {
  switch (k) {
    case runtime::ExitStatus::Kind::kExited: return "exited";
    case runtime::ExitStatus::Kind::kTrapped: return "trapped";
    case runtime::ExitStatus::Kind::kKilled: return "killed";
  }
  return "exited";
}

std::string default_cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/pith";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pith";
  return "/tmp/pith-cache";
}

std::optional<uint64_t> parse_id(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  while (out.size() < n) out += fmt::format("{:016x}", rng());
  out.resize(n);
  return out;
}

// The /v1 routes (matched outside the coroutine: GCC 12 miscompiles brace-init arrays in
// coroutine frames).
struct Route {
  enum Kind { kNone, kModels, kCompletions, kChatCompletions, kPrograms, kProgram, kInstances, kInstance } kind = kNone;
  std::string id, action;
};

Route match_route(const std::string& path) {
  std::vector<std::string> p;
  for (size_t at = 1; at <= path.size();) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    p.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  if (!p.empty() && p.back().empty()) p.pop_back();
  Route r;
  if (p.size() < 2 || p[0] != "v1") return r;
  if (p.size() == 2 && p[1] == "models") r.kind = Route::kModels;
  else if (p.size() == 2 && p[1] == "completions") r.kind = Route::kCompletions;
  else if (p.size() == 3 && p[1] == "chat" && p[2] == "completions") r.kind = Route::kChatCompletions;
  else if (p.size() == 2 && p[1] == "programs") r.kind = Route::kPrograms;
  else if (p.size() == 3 && p[1] == "programs") r.kind = Route::kProgram, r.id = p[2];
  else if (p.size() == 2 && p[1] == "instances") r.kind = Route::kInstances;
  else if ((p.size() == 3 || p.size() == 4) && p[1] == "instances") {
    r.kind = Route::kInstance;
    r.id = p[2];
    if (p.size() == 4) r.action = p[3];
  }
  return r;
}

}  // namespace

ApiServer::ApiServer(ServeConfig config) : cfg_(std::move(config)) {
  if (cfg_.cache_dir.empty()) cfg_.cache_dir = default_cache_root();
  for (const auto& k : cfg_.api_keys)
    if (!k.empty()) keys_.insert(k);
  if (!cfg_.api_keys_file.empty()) {
    std::ifstream in(cfg_.api_keys_file);
    if (!in) fail("cannot read API keys file {}", cfg_.api_keys_file);
    std::string line;
    while (std::getline(in, line)) {
      auto b = line.find_first_not_of(" \t\r");
      auto e = line.find_last_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      keys_.insert(line.substr(b, e - b + 1));
    }
    if (keys_.empty()) fail("API keys file {} holds no key", cfg_.api_keys_file);
  }
  started_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiServer::~ApiServer() {
  if (loader_.joinable()) loader_.join();
}

// ---------------------------------------------------------------- startup and shutdown

void ApiServer::load_model() {
  try {
    ServingOptions so;
    so.model_path = cfg_.model;
    so.engine.n_threads = cfg_.threads;
    so.engine.kv_memory_bytes = parse_byte_size(cfg_.kv_memory);
    so.engine.kv_page_size = cfg_.kv_page_size;
    so.control.policy = cfg_.batch_policy;
    so.control.max_batch_tokens = cfg_.max_batch_tokens;
    if (cfg_.batch_formation == "fcfs") so.control.batch_formation = BatchFormation::Fcfs;
    else if (cfg_.batch_formation != "decode-first")
      fail("batch formation must be decode-first or fcfs, not '{}'", cfg_.batch_formation);
    so.control.prefix_cache = !cfg_.no_prefix_cache;
    so.control.max_kv_pages_per_instance = cfg_.max_kv_pages_per_inferlet;
    so.runtime.compiler.cache_dir = cfg_.cache_dir + "/native";
    so.runtime.threads = std::max(1, cfg_.runtime_threads);
    so.runtime.limits.cpu_ns = static_cast<uint64_t>(cfg_.inferlet_cpu_limit_s * 1e9);
    so.runtime.limits.memory_pages = cfg_.inferlet_memory_mb * 16;  // 64 KiB Wasm pages
    so.runtime.http_allow = cfg_.inferlet_http_allow;
    auto t0 = Clock::now();
    stack_ = std::make_unique<ServingStack>(so);
    programs_ = std::make_unique<ProgramStore>(cfg_.cache_dir + "/programs", stack_->runtime());
    model_name_ = stack_->model_name();
    context_length_ = stack_->weights().config.context_length;
    if (context_length_ == 0) context_length_ = 4096;

    std::string tmpl = stack_->tokenizer().chat_template();
    if (!cfg_.chat_template.empty()) {
      std::ifstream in(cfg_.chat_template);
      if (!in) fail("cannot read chat template {}", cfg_.chat_template);
      tmpl.assign(std::istreambuf_iterator<char>(in), {});
    } else if (tmpl.empty()) {
      spdlog::warn("model has no chat template: /v1/chat/completions uses the Llama 3 layout");
      tmpl = kFallbackChatTemplate;
    }
    chat_template_ = std::make_unique<ChatTemplate>(tmpl);

    std::string_view builtin = builtin_openai_completion_wasm();
    if (builtin.empty())
      spdlog::warn("built without the openai_completion inferlet: the OpenAI endpoints answer 503");
    else
      programs_->add_builtin(kCompletionProgram, std::string(builtin));

    register_metrics();
    const auto g = stack_->controller().gauges();
    spdlog::info("model {} loaded in {:.1f} s: {} layers, context {}, KV pool {} pages x {} tokens ({}), backend {}, {} runtime threads",
                 model_name_, std::chrono::duration<double>(Clock::now() - t0).count(),
                 stack_->weights().config.n_layers, context_length_, g.pages_total, cfg_.kv_page_size, cfg_.kv_memory,
                 stack_->backend().info().name + " (" + stack_->backend().info().device + ")", so.runtime.threads);
    ready_ = true;
  } catch (const std::exception& e) {
    spdlog::error("cannot serve {}: {}", cfg_.model, e.what());
    exit_code_ = 1;
    asio::post(io_, [this] { asio::co_spawn(io_, shutdown(), asio::detached); });
  }
}

int ApiServer::run() {
  HttpLimits limits;
  limits.max_body_bytes = cfg_.max_body_bytes;
  limits.max_upload_bytes = cfg_.max_upload_bytes;
  limits.is_upload = [](std::string_view target) { return target.starts_with("/v1/programs"); };
  http_ = std::make_unique<HttpServer>(io_, limits, [this](HttpExchange& ex) { return handle(ex); });
  http_->listen(cfg_.host, cfg_.port);
  spdlog::info("pith serve: listening on http://{}:{} ({}), loading {}", cfg_.host, http_->port(),
               keys_.empty() ? "no API keys" : fmt::format("{} API key(s)", keys_.size()), cfg_.model);

  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    asio::co_spawn(io_, shutdown(), asio::detached);
  });
  asio::co_spawn(io_, housekeeping(), asio::detached);
  loader_ = std::thread([this] { load_model(); });
  io_.run();
  if (loader_.joinable()) loader_.join();
  // Instances still alive (shutdown grace exceeded) are killed by the runtime's destructor.
  programs_.reset();
  stack_.reset();
  spdlog::info("pith serve: stopped");
  return exit_code_;
}

asio::awaitable<void> ApiServer::shutdown() {
  if (stopping_.exchange(true)) co_return;
  http_->stop_accepting();
  for (const auto& r : registry_.list())
    if (auto inst = r->live()) inst->terminate("server shutting down");
  asio::steady_timer t(io_);
  boost::system::error_code ec;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (registry_.running() > 0 && Clock::now() < deadline) {
    t.expires_after(std::chrono::milliseconds(20));
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  // Let event streams deliver the terminated events.
  t.expires_after(std::chrono::milliseconds(200));
  co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  io_.stop();
}

void ApiServer::register_metrics() {
  Controller& ctl = stack_->controller();
  auto g = [&ctl] { return ctl.gauges(); };
  metrics_.gauge("pith_kv_pages", "KV cache pages by state", [g] { auto x = g(); return double(x.pages_free); }, "state=\"free\"");
  metrics_.gauge("pith_kv_pages", "KV cache pages by state",
                 [g] { auto x = g(); return double(x.pages_total - x.pages_free - x.pages_cached); }, "state=\"used\"");
  metrics_.gauge("pith_kv_pages", "KV cache pages by state", [g] { return double(g().pages_cached); }, "state=\"cached\"");
  metrics_.gauge("pith_kv_pages_total", "KV cache pool size in pages", [g] { return double(g().pages_total); });
  metrics_.gauge("pith_running_instances", "Inferlet instances running in the runtime",
                 [this] { return double(stack_->runtime().live_instances()); });
  metrics_.gauge("pith_queued_calls", "Model calls waiting in command queues", [g] { return double(g().queue_depth); });
  metrics_.counter_fn("pith_prefix_cache_hit_tokens_total", "Prompt tokens served by the radix prefix cache",
                      [g] { return double(g().prefix_hit_tokens); });
  metrics_.counter_fn("pith_prefix_cache_miss_tokens_total", "Prompt tokens looked up and not found in the prefix cache",
                      [g] { return double(g().prefix_miss_tokens); });
  metrics_.counter_fn("pith_prompt_tokens_computed_total", "Forward input tokens of prefill sequences (computed, not cached)",
                      [g] { return double(g().prefill_tokens); });
  metrics_.counter_fn("pith_forward_tokens_total", "Forward input tokens by kind", [g] { return double(g().prefill_tokens); },
                      "kind=\"prefill\"");
  metrics_.counter_fn("pith_forward_tokens_total", "Forward input tokens by kind", [g] { return double(g().decode_tokens); },
                      "kind=\"decode\"");
  metrics_.counter_fn("pith_batches_total", "Batches executed by the inference layer", [g] { return double(g().batches); });
  metrics_.counter_fn("pith_instances_killed_for_memory_total", "Instances ended by the KV contention policy",
                      [g] { return double(g().instances_killed_for_memory); });
  auto& batch_size = metrics_.histogram("pith_batch_size", "Sequences per forward batch", exponential_buckets(1, 2, 10));
  auto& batch_tokens = metrics_.histogram("pith_batch_tokens", "Tokens per forward batch", exponential_buckets(1, 2, 14));
  ctl.set_batch_observer([&batch_size, &batch_tokens](const BatchStats& s) {
    if (s.type != CallType::Forward) return;
    batch_size.observe(s.seqs);
    batch_tokens.observe(s.tokens);
  });
}

asio::awaitable<void> ApiServer::housekeeping() {
  asio::steady_timer t(io_);
  boost::system::error_code ec;
  auto last_log = Clock::now();
  ControllerGauges last{};
  bool have_last = false;
  auto& compile = metrics_.histogram("pith_program_compile_seconds", "Native compile time of uploaded programs",
                                     exponential_buckets(0.05, 2, 10));
  while (!stopping_) {
    t.expires_after(std::chrono::seconds(1));
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (stopping_) break;
    registry_.reap(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.finished_ttl_s)));
    if (!ready_) continue;
    for (const auto& p : programs_->list())
      if (p.native_ready && compile_observed_.insert(p.hash).second && p.compile_seconds > 0) compile.observe(p.compile_seconds);
    if (cfg_.log_interval_s <= 0) continue;
    const double dt = std::chrono::duration<double>(Clock::now() - last_log).count();
    if (dt < cfg_.log_interval_s) continue;
    const ControllerGauges g = stack_->controller().gauges();
    if (have_last && (g.tokens != last.tokens || registry_.running() > 0)) {
      const uint64_t hit = g.prefix_hit_tokens - last.prefix_hit_tokens, miss = g.prefix_miss_tokens - last.prefix_miss_tokens;
      spdlog::info("prompt {:.1f} tok/s, generation {:.1f} tok/s, running {} inferlets, queued {} calls, KV usage {:.1f}%, prefix-cache hit {:.1f}%",
                   double(g.prefill_tokens - last.prefill_tokens) / dt, double(g.decode_tokens - last.decode_tokens) / dt,
                   stack_->runtime().live_instances(), g.queue_depth,
                   g.pages_total ? 100.0 * (g.pages_total - g.pages_free) / g.pages_total : 0.0,
                   hit + miss ? 100.0 * double(hit) / double(hit + miss) : 0.0);
    }
    last = g;
    have_last = true;
    last_log = Clock::now();
  }
}

// ---------------------------------------------------------------- routing

bool ApiServer::authorized(const HttpExchange& ex, std::string& key) const {
  if (keys_.empty()) return true;
  std::string h = ex.header("Authorization");
  if (h.size() < 8 || !beast::iequals(h.substr(0, 7), "Bearer ")) return false;
  key = h.substr(7);
  return keys_.count(key) > 0;
}

asio::awaitable<void> ApiServer::handle(HttpExchange& ex) {
  const auto method = ex.req.method();
  const std::string& path = ex.path;
  metrics_.counter("pith_http_requests_total", "HTTP requests received").inc();
  if (path == "/health" && (method == http::verb::get || method == http::verb::head)) {
    if (stopping_) {
      json reply = {{"status", "stopping"}};
      co_return co_await ex.respond_json(http::status::service_unavailable, reply);
    }
    if (!ready_) {
      json reply = {{"status", "loading"}};
      co_return co_await ex.respond_json(http::status::service_unavailable, reply);
    }
    json reply = {{"status", "ok"}, {"model", model_name_}};
    co_return co_await ex.respond_json(http::status::ok, reply);
  }
  std::string key;
  if (!authorized(ex, key)) {
    metrics_.counter("pith_http_unauthorized_total", "Requests refused for a missing or wrong API key").inc();
    co_return co_await ex.error(http::status::unauthorized, "unauthorized",
                                "missing or invalid API key (send Authorization: Bearer KEY)");
  }
  if (path == "/metrics" && method == http::verb::get)
    co_return co_await ex.respond(http::status::ok, metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  if (!ready_ || stopping_)
    co_return co_await ex.error(http::status::service_unavailable, "unavailable",
                                stopping_ ? "the server is shutting down" : "the model is still loading");

  Route route = match_route(path);
  auto method_not_allowed = [&ex]() -> asio::awaitable<void> {
    co_await ex.error(http::status::method_not_allowed, "bad_request",
                      fmt::format("{} is not allowed on {}", std::string(ex.req.method_string()), ex.path));
  };
  switch (route.kind) {
    case Route::kModels: {
      if (method != http::verb::get) co_return co_await method_not_allowed();
      json m = {{"id", model_name_}, {"object", "model"}, {"created", started_unix_}, {"owned_by", "pith"},
                {"max_model_len", context_length_}};
      json reply = {{"object", "list"}, {"data", json::array({m})}};
      co_return co_await ex.respond_json(http::status::ok, reply);
    }
    case Route::kCompletions:
    case Route::kChatCompletions:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_completion(ex, route.kind == Route::kChatCompletions, key);
    case Route::kPrograms:
      if (method == http::verb::post) co_return co_await upload_program(ex);
      if (method == http::verb::get) co_return co_await programs(ex, "");
      co_return co_await method_not_allowed();
    case Route::kProgram:
      co_return co_await programs(ex, route.id);
    case Route::kInstances: {
      if (method == http::verb::post) co_return co_await launch_instance(ex, key);
      if (method != http::verb::get) co_return co_await method_not_allowed();
      json list = json::array();
      for (const auto& r : registry_.list()) list.push_back(describe(*r));
      json reply = {{"instances", list}};
      co_return co_await ex.respond_json(http::status::ok, reply);
    }
    case Route::kInstance:
      co_return co_await instance(ex, route.id, route.action);
    case Route::kNone:
      break;
  }
  co_await ex.error(http::status::not_found, "not_found", fmt::format("no route for {}", path));
}

// ---------------------------------------------------------------- programs

asio::awaitable<void> ApiServer::upload_program(HttpExchange& ex) {
  std::string body = std::move(ex.req.body());
  if (body.empty()) co_return co_await ex.error(http::status::bad_request, "bad_request", "empty upload: send the .wasm bytes as the body");
  std::pair<ProgramInfo, bool> r;
  std::string invalid;
  try {
    r = programs_->upload(std::move(body), ex.query.count("name") ? ex.query["name"] : "");
  } catch (const std::exception& e) {
    invalid = e.what();
  }
  if (!invalid.empty()) {
    metrics_.counter("pith_program_uploads_total", "Program uploads", "result=\"invalid\"").inc();
    co_return co_await ex.error(http::status::bad_request, "bad_request", "invalid program: " + invalid);
  }
  metrics_.counter("pith_program_uploads_total", "Program uploads", r.second ? "result=\"existing\"" : "result=\"new\"").inc();
  json reply = {{"hash", r.first.hash}, {"size", r.first.size}, {"existing", r.second}};
  co_await ex.respond_json(r.second ? http::status::ok : http::status::created, reply);
}

asio::awaitable<void> ApiServer::programs(HttpExchange& ex, const std::string& hash) {
  auto entry = [](const ProgramInfo& p) {
    json j = {{"hash", p.hash}, {"size", p.size}, {"uploaded_at", p.uploaded_at}, {"native_ready", p.native_ready},
              {"builtin", p.builtin}};
    if (!p.name.empty()) j["name"] = p.name;
    return j;
  };
  const auto method = ex.req.method();
  if (hash.empty()) {
    json list = json::array();
    for (const auto& p : programs_->list()) list.push_back(entry(p));
    json reply = {{"programs", list}};
    co_return co_await ex.respond_json(http::status::ok, reply);
  }
  auto p = programs_->find(hash);
  if (!p) co_return co_await ex.error(http::status::not_found, "not_found", fmt::format("program {} is not uploaded", hash));
  if (method == http::verb::get || method == http::verb::head) co_return co_await ex.respond_json(http::status::ok, entry(*p));
  if (method == http::verb::delete_) {
    std::string err;
    try {
      programs_->remove(hash);
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (!err.empty()) co_return co_await ex.error(http::status::bad_request, "bad_request", err);
    co_return co_await ex.respond(http::status::no_content, "");
  }
  co_await ex.error(http::status::method_not_allowed, "bad_request", "use GET, HEAD or DELETE on a program");
}

// ---------------------------------------------------------------- instances

ApiServer::Launched ApiServer::launch(const std::string& hash, std::vector<std::string> args, const std::string& owner,
                                      bool detach) {
  Launched out;
  auto refuse = [&](http::status s, std::string type, std::string msg) {
    out.error = LaunchError{s, std::move(type), std::move(msg)};
    return out;
  };
  if (registry_.running() >= cfg_.max_instances)
    return refuse(http::status::too_many_requests, "too_many_requests",
                  fmt::format("{} instances are running, the server's limit", cfg_.max_instances));
  if (cfg_.max_instances_per_key > 0 && !keys_.empty() && registry_.running_for(owner) >= cfg_.max_instances_per_key)
    return refuse(http::status::too_many_requests, "too_many_requests",
                  fmt::format("this API key already runs {} instances, its limit", cfg_.max_instances_per_key));
  std::shared_ptr<runtime::Program> program;
  try {
    program = programs_->get(hash);
  } catch (const std::exception& e) {
    return refuse(http::status::internal_server_error, "internal", e.what());
  }
  if (!program) return refuse(http::status::not_found, "not_found", fmt::format("program {} is not uploaded", hash));

  auto rec = std::make_shared<InstanceRecord>();
  rec->program = hash;
  if (auto p = programs_->find(hash)) rec->program_name = p->name;  // argv[0] when named
  rec->args = args;
  rec->owner = owner;
  rec->detach = detach;
  rec->events = std::make_shared<EventLog>(io_, cfg_.event_buffer, cfg_.event_buffer_bytes);
  Metrics* metrics = &metrics_;
  auto* io = &io_;
  runtime::EventSink sink = [rec, metrics, io](uint64_t, const runtime::InstanceEvent& e) {
    using K = runtime::InstanceEvent::Kind;
    if (e.kind == K::kMessage) {
      rec->events->append("message", json_text({{"text", e.text}}), e.text);
    } else if (e.kind == K::kLog) {
      rec->events->append("log", json_text({{"level", level_name(e.level)}, {"text", e.text}}));
    } else {
      runtime::ExitStatus st{static_cast<runtime::ExitStatus::Kind>(e.level), e.code, e.text};
      {
        std::lock_guard lock(rec->mu);
        rec->exit = st;
        rec->finished_at = Clock::now();
      }
      rec->events->append("terminated", json_text({{"kind", exit_kind(st.kind)}, {"code", st.code}, {"reason", st.reason}}));
      rec->events->close();
      metrics->counter("pith_instances_finished_total", "Instances that ended, by how",
                       fmt::format("kind=\"{}\"", exit_kind(st.kind)))
          .inc();
      // Drop the Instance (and the sink holding this record) off the scheduler thread.
      asio::post(*io, [rec] {
        std::lock_guard lock(rec->mu);
        rec->instance.reset();
      });
    }
  };
  std::vector<std::string> argv = {rec->program_name.empty() ? hash.substr(0, 12) : rec->program_name};
  argv.insert(argv.end(), args.begin(), args.end());
  std::shared_ptr<runtime::Instance> inst;
  try {
    inst = stack_->launch(program, std::move(argv), std::move(sink));
  } catch (const std::exception& e) {
    return refuse(http::status::internal_server_error, "internal", fmt::format("launch failed: {}", e.what()));
  }
  rec->id = inst->id();
  {
    std::lock_guard lock(rec->mu);
    if (!rec->exit) rec->instance = inst;
  }
  registry_.add(rec);
  metrics_.counter("pith_instances_launched_total", "Instances launched").inc();
  out.record = rec;
  return out;
}

json ApiServer::describe(const InstanceRecord& r) const {
  json exit = nullptr;
  std::shared_ptr<runtime::Instance> inst;
  Clock::time_point end = Clock::now();
  {
    std::lock_guard lock(r.mu);
    inst = r.instance;
    if (r.exit) {
      exit = {{"kind", exit_kind(r.exit->kind)}, {"code", r.exit->code}, {"reason", r.exit->reason}};
      end = r.finished_at;
    }
  }
  json j = {{"id", std::to_string(r.id)},
            {"program", r.program},
            {"args", r.args},
            {"state", exit.is_null() ? "running" : "finished"},
            {"age_s", std::chrono::duration<double>(end - r.started).count()},
            {"kv_pages", exit.is_null() ? stack_->controller().pages_held(r.id) : 0},
            {"detach", r.detach},
            {"exit", exit}};
  if (!r.program_name.empty()) j["program_name"] = r.program_name;
  return j;
}

asio::awaitable<void> ApiServer::launch_instance(HttpExchange& ex, const std::string& owner) {
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    co_return co_await ex.error(http::status::bad_request, "bad_request", "the body must be a JSON object {\"program\", \"args\"}");
  if (!body.contains("program") || !body["program"].is_string())
    co_return co_await ex.error(http::status::bad_request, "bad_request", "'program' (a SHA-256 hex string) is required");
  std::vector<std::string> args;
  if (auto it = body.find("args"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) co_return co_await ex.error(http::status::bad_request, "bad_request", "'args' must be an array of strings");
    for (const auto& a : *it) {
      if (!a.is_string()) co_return co_await ex.error(http::status::bad_request, "bad_request", "'args' must be an array of strings");
      args.push_back(a.get<std::string>());
    }
  }
  bool detach = true;
  if (auto it = body.find("detach"); it != body.end() && it->is_boolean()) detach = it->get<bool>();
  std::string hash = body["program"].get<std::string>();
  if (auto named = programs_->builtin_hash(hash)) hash = *named;  // built-ins also by name
  Launched l = launch(hash, std::move(args), owner, detach);
  if (l.error) co_return co_await ex.error(l.error->status, l.error->type, l.error->message);
  json reply = {{"id", std::to_string(l.record->id)}};
  co_await ex.respond_json(http::status::created, reply);
}

void ApiServer::stream_opened(const std::shared_ptr<InstanceRecord>& rec) {
  ++rec->streams;
  rec->had_stream = true;
  if (rec->orphan_timer) rec->orphan_timer->cancel();
}

void ApiServer::stream_closed(const std::shared_ptr<InstanceRecord>& rec) {
  if (--rec->streams > 0 || rec->detach || rec->finished() || stopping_) return;
  // The client went away: give it a grace period to reconnect, then end the instance.
  auto timer = std::make_shared<asio::steady_timer>(io_);
  rec->orphan_timer = timer;
  timer->expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.orphan_grace_s)));
  timer->async_wait([rec, timer](const boost::system::error_code& ec) {
    if (ec || rec->streams > 0) return;
    if (auto inst = rec->live()) inst->terminate("client disconnected");
  });
}

asio::awaitable<void> ApiServer::instance(HttpExchange& ex, const std::string& id_text, const std::string& action) {
  auto id = parse_id(id_text);
  auto rec = id ? registry_.find(*id) : nullptr;
  if (!rec) co_return co_await ex.error(http::status::not_found, "not_found", fmt::format("no instance {}", id_text));
  const auto method = ex.req.method();
  if (action.empty()) {
    if (method == http::verb::get) co_return co_await ex.respond_json(http::status::ok, describe(*rec));
    if (method == http::verb::delete_) {
      if (auto inst = rec->live()) inst->terminate("killed by client");
      json reply = {{"id", id_text}, {"state", rec->finished() ? "finished" : "terminating"}};
      co_return co_await ex.respond_json(http::status::accepted, reply);
    }
  } else if (action == "messages" && method == http::verb::post) {
    auto inst = rec->live();
    if (!inst) co_return co_await ex.error(http::status::conflict, "conflict", "the instance has finished");
    if (!inst->push_message(std::move(ex.req.body())))
      co_return co_await ex.error(http::status::conflict, "conflict", "the instance's inbox is closed or full");
    json reply = {{"id", id_text}};
    co_return co_await ex.respond_json(http::status::accepted, reply);
  } else if (action == "close" && method == http::verb::post) {
    if (auto inst = rec->live()) inst->close_input();
    json reply = {{"id", id_text}};
    co_return co_await ex.respond_json(http::status::accepted, reply);
  } else if (action == "events" && method == http::verb::get) {
    co_return co_await event_stream(ex, rec);
  } else if (action != "messages" && action != "close" && action != "events") {
    co_return co_await ex.error(http::status::not_found, "not_found", fmt::format("no route for {}", ex.path));
  }
  co_await ex.error(http::status::method_not_allowed, "bad_request",
                    fmt::format("{} is not allowed on {}", std::string(ex.req.method_string()), ex.path));
}

asio::awaitable<void> ApiServer::event_stream(HttpExchange& ex, std::shared_ptr<InstanceRecord> rec) {
  uint64_t after = 0;
  std::string from = ex.query.count("after") ? ex.query["after"] : ex.header("Last-Event-ID");
  if (!from.empty()) {
    auto v = parse_id(from);
    if (!v) co_return co_await ex.error(http::status::bad_request, "bad_request", "'after' / Last-Event-ID must be an event id");
    after = *v;
  }
  if (!co_await ex.begin_stream("text/event-stream")) co_return;
  ex.watch_hangup();
  stream_opened(rec);
  auto last_write = Clock::now();
  for (;;) {
    EventLog::Read r = rec->events->read_after(after);
    std::string out;
    // A reader that fell behind the buffer (at connect or later) learns how much it missed.
    if (r.dropped) out += fmt::format("event: dropped\ndata: {{\"count\":{}}}\n\n", r.dropped);
    for (const auto& e : r.events) {
      out += fmt::format("id: {}\nevent: {}\ndata: {}\n\n", e.id, e.type, e.data);
      after = e.id;
    }
    if (out.empty() && Clock::now() - last_write > std::chrono::seconds(2)) out = ": keep-alive\n\n";
    if (!out.empty()) {
      if (!co_await ex.write_chunk(out)) break;
      last_write = Clock::now();
    }
    if (r.closed || ex.client_gone()) break;
    co_await rec->events->wait(after, std::chrono::milliseconds(250));  // also polls for hang-up
  }
  stream_closed(rec);
  co_await ex.end_stream();
}

// ---------------------------------------------------------------- OpenAI

asio::awaitable<void> ApiServer::openai_completion(HttpExchange& ex, bool chat, const std::string& owner) {
  const auto t_request = Clock::now();
  metrics_.counter("pith_openai_requests_total", "OpenAI-compatible requests", chat ? "endpoint=\"chat\"" : "endpoint=\"completions\"").inc();
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded()) co_return co_await ex.error(http::status::bad_request, "bad_request", "the body is not valid JSON");
  CompletionRequest req;
  std::string bad;
  try {
    std::random_device rd;
    req = parse_completion_request(body, chat, stack_->tokenizer(), *chat_template_, context_length_,
                                   (uint64_t(rd()) << 32) | rd());
  } catch (const std::exception& e) {
    bad = e.what();
  }
  if (!bad.empty()) co_return co_await ex.error(http::status::bad_request, "bad_request", bad);
  if (!req.model.empty() && req.model != model_name_)
    co_return co_await ex.error(http::status::not_found, "not_found",
                                fmt::format("the model '{}' does not exist; this server serves '{}'", req.model, model_name_));
  auto hash = programs_->builtin_hash(kCompletionProgram);
  if (!hash) co_return co_await ex.error(http::status::service_unavailable, "unavailable", "the built-in completion inferlet is not available");
  Launched l = launch(*hash, req.inferlet_args(), owner, true);
  if (l.error) co_return co_await ex.error(l.error->status, l.error->type, l.error->message);
  auto rec = l.record;

  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  CompletionSession session(req, stack_->tokenizer(), (chat ? "chatcmpl-" : "cmpl-") + random_hex(24), model_name_, created);
  auto& ttft = metrics_.histogram("pith_time_to_first_token_seconds", "Time from request to first generated token",
                                  exponential_buckets(0.001, 2, 16));
  auto& itl = metrics_.histogram("pith_inter_token_latency_seconds", "Time between generated tokens of a request",
                                 exponential_buckets(0.0005, 2, 16));
  auto& gen_tokens = metrics_.counter("pith_generation_tokens_total", "Tokens generated for OpenAI requests");
  if (req.stream && !co_await ex.begin_stream("text/event-stream")) {
    if (auto inst = rec->live()) inst->terminate("client disconnected");
    co_return;
  }
  ex.watch_hangup();  // a client that goes away stops its generation
  auto end_instance = [&rec](const char* why) {
    if (auto inst = rec->live()) inst->terminate(why);
  };
  std::string failure;
  std::optional<runtime::ExitStatus> exit;
  Clock::time_point last_token{};
  uint64_t after = 0;
  bool gone = false;
  while (failure.empty() && !gone) {
    EventLog::Read r = rec->events->read_after(after);
    for (const auto& e : r.events) {
      after = e.id;
      if (e.type == "terminated") {
        std::lock_guard lock(rec->mu);
        exit = rec->exit;
        continue;
      }
      if (e.type != "message") continue;
      std::vector<json> chunks;
      try {
        chunks = session.on_message(e.text);
      } catch (const std::exception& err) {
        failure = err.what();
        break;
      }
      if (e.text.starts_with("tok ")) {
        const auto now = Clock::now();
        if (last_token == Clock::time_point{}) ttft.observe(std::chrono::duration<double>(now - t_request).count());
        else itl.observe(std::chrono::duration<double>(now - last_token).count());
        last_token = now;
        gen_tokens.inc();
      }
      for (const auto& c : chunks) {
        if (!co_await ex.write_chunk("data: " + json_text(c) + "\n\n")) {
          gone = true;
          break;
        }
      }
      if (gone) break;
    }
    if (session.all_done() || exit || r.closed) break;
    if (ex.client_gone()) {
      gone = true;
      break;
    }
    co_await rec->events->wait(after, std::chrono::milliseconds(250));
  }
  if (gone) {
    end_instance("client disconnected");
    co_return;
  }
  if (!session.all_done()) {
    // The inferlet ended (or failed) before finishing every choice.
    if (failure.empty()) {
      if (!exit) {
        std::lock_guard lock(rec->mu);
        exit = rec->exit;
      }
      if (exit && exit->kind == runtime::ExitStatus::Kind::kExited && exit->code == 0) failure.clear();
      else failure = exit ? exit->reason : "the completion inferlet ended unexpectedly";
    }
  }
  end_instance("finished");
  metrics_.counter("pith_prompt_tokens_total", "Prompt tokens of OpenAI requests").inc(session.prompt_tokens());
  metrics_.counter("pith_prompt_tokens_cached_total", "Prompt tokens of OpenAI requests served by the prefix cache")
      .inc(session.cached_tokens());
  if (!failure.empty()) {
    metrics_.counter("pith_openai_failures_total", "OpenAI requests that failed during generation").inc();
    if (!req.stream) {
      auto status = failure.find("KV memory") != std::string::npos || failure.find("out of KV") != std::string::npos
                        ? http::status::service_unavailable
                        : http::status::internal_server_error;
      co_return co_await ex.error(status, status == http::status::service_unavailable ? "unavailable" : "internal", failure);
    }
    json err = {{"error", {{"message", failure}, {"type", "internal"}, {"code", 500}}}};
    co_await ex.write_chunk("data: " + json_text(err) + "\n\n");
    co_await ex.write_chunk("data: [DONE]\n\n");
    co_return co_await ex.end_stream();
  }
  std::vector<json> last = session.finish();
  if (!req.stream) co_return co_await ex.respond_json(http::status::ok, session.response());
  for (const auto& c : last)
    if (!co_await ex.write_chunk("data: " + json_text(c) + "\n\n")) co_return;
  co_await ex.write_chunk("data: [DONE]\n\n");
  co_await ex.end_stream();
}

}  // namespace pith::server
