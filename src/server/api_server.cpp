#include "server/api_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "chat_template/chat_template.h"
#include "runtime/subprocess.h"
#include "server/builtin_programs.h"
#include "server/instance_routes.h"
#include "server/openai_routes.h"
#include "server/program_routes.h"
#include "server/router_metrics.h"
#include "stack/serving_stack.h"

namespace pith::server {

using asio::use_awaitable;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Used when the model carries no chat template: Llama 3's header/eot layout.
constexpr const char* kFallbackChatTemplate =
    "{{- bos_token if bos_token is defined else '' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] "
    "| trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
    "}}{%- endif %}";

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20));
}

// The /v1 routes (matched outside the coroutine: GCC 12 miscompiles brace-init arrays in
// coroutine frames).
struct Route {
  enum Kind {
    None,
    Models,
    Model,
    LoadLora,
    UnloadLora,
    Tokenize,
    Detokenize,
    Completions,
    ChatCompletions,
    Programs,
    Program,
    Instances,
    Instance,
    Responses,
    Response,
    Embeddings
  } kind = None;
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
  // vLLM serves its tokenizer routes outside /v1.
  if (p.size() == 1 && p[0] == "tokenize") r.kind = Route::Tokenize;
  if (p.size() == 1 && p[0] == "detokenize") r.kind = Route::Detokenize;
  if (p.size() < 2 || p[0] != "v1") return r;
  if (p.size() == 2 && p[1] == "models")
    r.kind = Route::Models;
  else if (p.size() >= 3 && p[1] == "models") {  // a model id may hold slashes (org/name)
    r.kind = Route::Model;
    r.id = p[2];
    for (size_t i = 3; i < p.size(); ++i) r.id += "/" + p[i];
  } else if (p.size() == 2 && p[1] == "load_lora_adapter")
    r.kind = Route::LoadLora;
  else if (p.size() == 2 && p[1] == "unload_lora_adapter")
    r.kind = Route::UnloadLora;
  else if (p.size() == 2 && p[1] == "completions")
    r.kind = Route::Completions;
  else if (p.size() == 3 && p[1] == "chat" && p[2] == "completions")
    r.kind = Route::ChatCompletions;
  else if (p.size() == 2 && p[1] == "responses")
    r.kind = Route::Responses;
  else if (p.size() == 2 && p[1] == "embeddings")
    r.kind = Route::Embeddings;
  else if (p.size() == 3 && p[1] == "responses")
    r.kind = Route::Response, r.id = p[2];
  else if (p.size() == 2 && p[1] == "programs")
    r.kind = Route::Programs;
  else if (p.size() == 3 && p[1] == "programs")
    r.kind = Route::Program, r.id = p[2];
  else if (p.size() == 2 && p[1] == "instances")
    r.kind = Route::Instances;
  else if ((p.size() == 3 || p.size() == 4) && p[1] == "instances") {
    r.kind = Route::Instance;
    r.id = p[2];
    if (p.size() == 4) r.action = p[3];
  }
  return r;
}

}  // namespace

ApiServer::ApiServer(ServeConfig config)
    : settings_(resolve_serve_config(std::move(config))),
      compile_times_(metrics_),
      stats_log_(settings_.config.log_interval_s) {
  registry_.set_replica(settings_.config.replica_id);
  started_unix_ = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
}

ApiServer::~ApiServer() {
  if (loader_.joinable()) loader_.join();
}

// ---------------------------------------------------------------- startup and shutdown

void ApiServer::load_model() {
  const ServeConfig& cfg = settings_.config;
  try {
    ServingOptions so = settings_.serving;
    so.on_memory_kill = [this](uint64_t id) {
      registry_.mark_ended_by(id, PITH_ERR_OUT_OF_KV_PAGES);
    };
    auto t0 = Clock::now();
    stack_ = std::make_unique<ServingStack>(so);
    programs_ = std::make_unique<ProgramStore>(cfg.cache_dir + "/programs", stack_->runtime());
    model_name_ = stack_->model_name();
    ServedModel served{model_name_, stack_->weights().config.context_length, started_unix_};
    if (served.context_length == 0) served.context_length = 4096;

    std::string tmpl =
        settings_.chat_template ? *settings_.chat_template : stack_->tokenizer().chat_template();
    if (tmpl.empty() && !settings_.chat_template) {
      spdlog::warn("model has no chat template: /v1/chat/completions uses the Llama 3 layout");
      tmpl = kFallbackChatTemplate;
    }
    auto chat_template = std::make_unique<ChatTemplate>(tmpl);
    served.tool_format = cfg.tool_call_parser == "auto"
                             ? detect_tool_call_format(tmpl)
                             : *parse_tool_call_format(cfg.tool_call_parser);
    served.reasoning_from_template = cfg.reasoning_parser == "auto";
    served.reasoning = served.reasoning_from_template
                           ? detect_reasoning_format(*chat_template)
                           : *parse_reasoning_format(cfg.reasoning_parser);
    if (served.reasoning != ReasoningFormat::None)
      spdlog::info("chat responses separate reasoning ({})",
                   reasoning_format_name(served.reasoning));

    std::string_view builtin = builtin_openai_completion_wasm();
    if (builtin.empty())
      spdlog::warn("built without the openai_completion inferlet: the OpenAI endpoints answer 503");
    else
      programs_->add_builtin(kCompletionProgram, std::string(builtin));
    if (std::string_view e = builtin_openai_embedding_wasm(); !e.empty())
      programs_->add_builtin(kEmbeddingProgram, std::string(e));
    const std::string& file_pooling = stack_->weights().config.pooling;
    served.pooling = cfg.pooling != "auto"  ? cfg.pooling
                     : file_pooling.empty() ? "last"
                                            : file_pooling;
    if (!file_pooling.empty() || cfg.pooling != "auto")
      spdlog::info("/v1/embeddings pools the final hidden states: {} ({})", served.pooling,
                   cfg.pooling != "auto" ? "--pooling" : "as the model file says");

    context_.emplace(
        ServerContext{settings_, io_, metrics_, registry_, *stack_, *programs_, stopping_});
    launcher_ = std::make_unique<InstanceLauncher>(*context_);
    program_routes_ = std::make_unique<ProgramRoutes>(*context_);
    instance_routes_ = std::make_unique<InstanceRoutes>(*context_, *launcher_);
    openai_routes_ =
        std::make_unique<OpenAiRoutes>(*context_, *launcher_, served, std::move(chat_template));
    register_serving_metrics(metrics_, *stack_);
    register_router_metrics(metrics_, *stack_,
                            RouterLoad{[this] {
                                         size_t n = 0;
                                         for (const auto& r : registry_.list())
                                           if (r->live() && serves_request(*r)) ++n;
                                         return n;
                                       },
                                       [this] { return draining_.load(); }});

    const BackendInfo backend = stack_->backend().info();
    const auto g = stack_->controller().gauges();
    spdlog::info("model {} loaded in {:.1f} s: {} layers, context {}, {} runtime threads",
                 model_name_, std::chrono::duration<double>(Clock::now() - t0).count(),
                 stack_->weights().config.n_layers, served.context_length,
                 settings_.serving.runtime.threads);
    spdlog::info(
        "backend {} on {}{}: weights {}, KV pool {} ({} pages x {} tokens, {}), workspace {}",
        backend.name, backend.device,
        backend.device_memory_bytes
            ? fmt::format(" ({} device memory)", mib(backend.device_memory_bytes))
            : "",
        mib(backend.weight_bytes), mib(backend.kv_bytes), g.pages_total, cfg.kv_page_size,
        kv_dtype_name(backend.kv_dtype), mib(backend.workspace_bytes));
    ready_ = true;
  } catch (const std::exception& e) {
    spdlog::error("cannot serve {}: {}", cfg.model, e.what());
    exit_code_ = 1;
    asio::post(io_, [this] { asio::co_spawn(io_, shutdown(), asio::detached); });
  }
}

int ApiServer::run() {
  const ServeConfig& cfg = settings_.config;
  HttpLimits limits;
  limits.max_body_bytes = cfg.max_body_bytes;
  limits.max_upload_bytes = cfg.max_upload_bytes;
  limits.idle_timeout = std::chrono::seconds(static_cast<int64_t>(cfg.http_idle_timeout_s));
  limits.is_upload = [](std::string_view target) { return target.starts_with("/v1/programs"); };
  http_ =
      std::make_unique<HttpServer>(io_, limits, [this](HttpExchange& ex) { return handle(ex); });
  http_->listen(cfg.host, cfg.port);
  spdlog::info("pith serve: listening on http://{}:{} ({}), loading {} (device {})", cfg.host,
               http_->port(),
               settings_.api_keys.empty() ? "no API keys"
                                          : fmt::format("{} API key(s)", settings_.api_keys.size()),
               cfg.model, cfg.device);

  // The first signal drains (shutdown()); a second one ends everything at once.
  asio::signal_set signals(io_, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [this, &signals, &on_signal](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        if (stopping_) {
          spdlog::info("received {} again: ending every instance now", name);
          force_stop_ = true;
          return;
        }
        spdlog::info("received {}, shutting down", name);
        asio::co_spawn(io_, shutdown(), asio::detached);
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  asio::co_spawn(io_, housekeeping(), asio::detached);
  loader_ = std::thread([this] { load_model(); });
  io_.run();
  if (loader_.joinable()) loader_.join();
  // A background native build must not outlive the server (it would keep writing into the cache
  // directory, and keep a core busy, after the process is gone).
  if (size_t n = runtime::end_running_tools(std::chrono::seconds(5)))
    spdlog::info("ended {} native build tool(s) still running", n);
  // Instances still alive (shutdown grace exceeded) are killed by the runtime's destructor.
  openai_routes_.reset();
  instance_routes_.reset();
  program_routes_.reset();
  launcher_.reset();
  programs_.reset();
  stack_.reset();
  spdlog::info("pith serve: stopped");
  return exit_code_;
}

bool ApiServer::serves_request(const InstanceRecord& r) const {
  if (!programs_) return false;
  for (const char* name : {kCompletionProgram, kEmbeddingProgram})
    if (auto hash = programs_->builtin_hash(name); hash && r.program == *hash) return true;
  return false;
}

asio::awaitable<void> ApiServer::wait_until(std::function<bool()> done,
                                            Clock::time_point deadline) {
  asio::steady_timer t(io_);
  boost::system::error_code ec;
  while (!done() && !force_stop_ && Clock::now() < deadline) {
    t.expires_after(std::chrono::milliseconds(20));
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

// Graceful drain, so a router can roll replicas: no new connections, /health answers 503 and
// new requests on open connections are refused, OpenAI requests in flight finish (up to
// --drain-timeout), lifecycle instances end at once with a reason their clients see (their
// state lives here and cannot move). Then whatever still runs is ended.
asio::awaitable<void> ApiServer::shutdown() {
  if (stopping_.exchange(true)) co_return;
  http_->stop_accepting();
  draining_ = true;
  size_t requests = 0;
  for (const auto& r : registry_.list()) {
    auto inst = r->live();
    if (!inst) continue;
    if (serves_request(*r))
      ++requests;
    else
      inst->terminate("server shutting down");
  }
  const double drain_s = settings_.config.drain_timeout_s;
  if (requests > 0)
    spdlog::info("draining: {} OpenAI request(s) in flight may take up to {:g} s", requests,
                 drain_s);
  const auto t0 = Clock::now();
  co_await wait_until(
      [this] { return registry_.running() == 0; },
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(drain_s)));
  size_t cut = 0;
  for (const auto& r : registry_.list())
    if (auto inst = r->live()) {
      inst->terminate(force_stop_ ? "server shutting down"
                                  : "server shutting down (drain timeout)");
      ++cut;
    }
  if (requests > 0 || cut > 0)
    spdlog::info("drained in {:.1f} s; {} instance(s) ended unfinished",
                 std::chrono::duration<double>(Clock::now() - t0).count(), cut);
  draining_ = false;
  co_await wait_until([this] { return registry_.running() == 0; },
                      Clock::now() + std::chrono::seconds(10));
  // Native builds still running finish within the drain deadline too: their modules land in the
  // cache, so the next start (a rolling restart's replacement) loads them instead of compiling
  // again. Whatever is left then is ended by run().
  auto building = [this] {
    size_t n = 0;
    if (ready_)
      for (const ProgramInfo& p : programs_->list()) n += p.native_building;
    return n;
  };
  if (size_t n = building()) {
    const auto deadline =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(drain_s));
    spdlog::info("waiting up to {:.1f} s for {} native build(s) to reach the cache",
                 std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count()), n);
    co_await wait_until([&] { return building() == 0; }, deadline);
  }
  // Let event streams deliver the terminated events.
  asio::steady_timer t(io_);
  boost::system::error_code ec;
  t.expires_after(std::chrono::milliseconds(200));
  co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  io_.stop();
}

asio::awaitable<void> ApiServer::housekeeping() {
  asio::steady_timer t(io_);
  boost::system::error_code ec;
  const auto ttl = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(settings_.config.finished_ttl_s));
  while (!stopping_) {
    t.expires_after(std::chrono::seconds(1));
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (stopping_) break;
    registry_.reap(ttl);
    if (!ready_) continue;
    compile_times_.observe(programs_->list());
    stats_log_.tick(stack_->controller().gauges(), stack_->runtime().live_instances(),
                    registry_.running() > 0);
  }
}

// ---------------------------------------------------------------- routing

bool ApiServer::authorized(const HttpExchange& ex, std::string& key) const {
  if (settings_.api_keys.empty()) return true;
  std::string h = ex.header("Authorization");
  if (h.size() < 8 || !beast::iequals(h.substr(0, 7), "Bearer ")) return false;
  key = h.substr(7);
  return settings_.api_keys.count(key) > 0;
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
    metrics_
        .counter("pith_http_unauthorized_total", "Requests refused for a missing or wrong API key")
        .inc();
    co_return co_await ex.error(http::status::unauthorized, "unauthorized",
                                "missing or invalid API key (send Authorization: Bearer KEY)");
  }
  if (path == "/metrics" && method == http::verb::get)
    co_return co_await ex.respond(http::status::ok, metrics_.render(),
                                  "text/plain; version=0.0.4; charset=utf-8");
  if (!ready_ || stopping_)
    co_return co_await ex.error(
        http::status::service_unavailable, "unavailable",
        stopping_ ? "the server is shutting down" : "the model is still loading");
  co_await route(ex, key);
}

asio::awaitable<void> ApiServer::route(HttpExchange& ex, const std::string& key) {
  const auto method = ex.req.method();
  Route route = match_route(ex.path);
  auto method_not_allowed = [&ex]() -> asio::awaitable<void> {
    co_await ex.error(
        http::status::method_not_allowed, "bad_request",
        fmt::format("{} is not allowed on {}", std::string(ex.req.method_string()), ex.path));
  };
  switch (route.kind) {
    case Route::Models:
      if (method != http::verb::get) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->models(ex);
    case Route::Model:
      if (method != http::verb::get) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->model(ex, route.id);
    case Route::LoadLora:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->load_lora(ex);
    case Route::UnloadLora:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->unload_lora(ex);
    case Route::Tokenize:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->tokenize(ex);
    case Route::Detokenize:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->detokenize(ex);
    case Route::Completions:
    case Route::ChatCompletions:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->completion(ex, route.kind == Route::ChatCompletions, key);
    case Route::Responses:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->responses(ex, key);
    case Route::Response:
      co_return co_await openai_routes_->stored_response(ex, route.id);
    case Route::Embeddings:
      if (method != http::verb::post) co_return co_await method_not_allowed();
      co_return co_await openai_routes_->embeddings(ex, key);
    case Route::Programs:
      if (method == http::verb::post) co_return co_await program_routes_->upload(ex);
      if (method == http::verb::get) co_return co_await program_routes_->list(ex);
      co_return co_await method_not_allowed();
    case Route::Program:
      co_return co_await program_routes_->program(ex, route.id);
    case Route::Instances:
      if (method == http::verb::post) co_return co_await instance_routes_->create(ex, key);
      if (method != http::verb::get) co_return co_await method_not_allowed();
      co_return co_await instance_routes_->list(ex);
    case Route::Instance:
      co_return co_await instance_routes_->instance(ex, route.id, route.action);
    case Route::None:
      break;
  }
  co_await ex.error(http::status::not_found, "not_found", fmt::format("no route for {}", ex.path));
}

}  // namespace pith::server
