#include "server/openai_routes.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <random>

#include "chat_template/chat_template.h"
#include "server/completion_session.h"
#include "server/openai_api.h"
#include "server/responses_store.h"
#include "server/tokenize_api.h"
#include "stack/serving_stack.h"

namespace pith::server {

using nlohmann::json;
namespace proto = openai_protocol;

OpenAiRoutes::OpenAiRoutes(ServerContext& ctx, InstanceLauncher& launcher, ServedModel model,
                           std::unique_ptr<ChatTemplate> chat_template)
    : ctx_(ctx),
      launcher_(launcher),
      model_(std::move(model)),
      chat_template_(std::move(chat_template)),
      responses_store_(std::make_unique<ResponsesStore>(kStoredResponses, kStoredResponseBytes)) {}

OpenAiRoutes::~OpenAiRoutes() = default;

json OpenAiRoutes::model_object() const {
  return {{"id", model_.name},
          {"object", "model"},
          {"created", model_.created_unix},
          {"owned_by", "pith"},
          {"max_model_len", model_.context_length}};
}

// An adapter as vLLM lists it: its own id, the base as parent, its path as root.
json OpenAiRoutes::adapter_object(const AdapterInfo& a) const {
  return {{"id", a.name},
          {"object", "model"},
          {"created", a.loaded_unix},
          {"owned_by", "pith"},
          {"root", a.source},
          {"parent", model_.name},
          {"max_model_len", model_.context_length},
          {"lora",
           {{"format", a.format},
            {"rank", a.rank},
            {"alpha", a.alpha},
            {"targets", a.targets},
            {"bytes", a.weight_bytes}}}};
}

std::string OpenAiRoutes::served_names() const {
  std::string names = "'" + model_.name + "'";
  for (const AdapterInfo& a : ctx_.stack.controller().adapters().list())
    names += ", '" + a.name + "'";
  return names;
}

asio::awaitable<void> OpenAiRoutes::models(HttpExchange& ex) {
  json data = json::array({model_object()});
  for (const AdapterInfo& a : ctx_.stack.controller().adapters().list())
    data.push_back(adapter_object(a));
  json reply = {{"object", "list"}, {"data", data}};
  co_await ex.respond_json(http::status::ok, reply);
}

asio::awaitable<void> OpenAiRoutes::model(HttpExchange& ex, const std::string& id) {
  if (id == model_.name) co_return co_await ex.respond_json(http::status::ok, model_object());
  for (const AdapterInfo& a : ctx_.stack.controller().adapters().list())
    if (a.name == id) co_return co_await ex.respond_json(http::status::ok, adapter_object(a));
  co_await ex.error(
      http::status::not_found, "invalid_request_error",
      fmt::format("the model '{}' does not exist; this server serves {}", id, served_names()),
      "model");
}

asio::awaitable<void> OpenAiRoutes::load_lora(HttpExchange& ex) {
  json body = json::parse(ex.req.body(), nullptr, false);
  auto field = [&](const char* key) {
    auto it = body.is_object() ? body.find(key) : body.end();
    return body.is_object() && it != body.end() && it->is_string() ? it->get<std::string>()
                                                                   : std::string();
  };
  const std::string name = field("lora_name"), path = field("lora_path");
  for (const auto& [key, value] : body.is_object() ? body.items() : json::object().items())
    if (key != "lora_name" && key != "lora_path" && key != "load_inplace")
      co_return co_await ex.error(
          http::status::bad_request, "invalid_request_error",
          fmt::format("unknown field '{}' (lora_name, lora_path, load_inplace)", key), key);
  const auto inplace_it = body.is_object() ? body.find("load_inplace") : body.end();
  const bool inplace = body.is_object() && inplace_it != body.end() && inplace_it->is_boolean() &&
                       inplace_it->get<bool>();
  if (body.is_object() && inplace_it != body.end() && !inplace_it->is_boolean())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "'load_inplace' must be a boolean", "load_inplace");
  if (name.empty() || path.empty())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "both 'lora_name' and 'lora_path' must be given (strings)",
                                name.empty() ? "lora_name" : "lora_path");
  if (name == model_.name)
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                fmt::format("'{}' is the base model's name", name), "lora_name");
  AdapterInfo info;
  std::string refused;
  try {
    info = ctx_.stack.load_adapter(name, path, inplace);
  } catch (const std::exception& e) {
    refused = e.what();
  }
  if (!refused.empty())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error", refused,
                                "lora_path");
  spdlog::info("LoRA adapter '{}' loaded: {} ({}, rank {}, {}; {:.1f} MiB)", info.name, info.source,
               info.format, info.rank, info.targets, double(info.weight_bytes) / (1 << 20));
  co_await ex.respond(http::status::ok,
                      fmt::format("Success: LoRA adapter '{}' added successfully.", name),
                      "text/plain");
}

asio::awaitable<void> OpenAiRoutes::unload_lora(HttpExchange& ex) {
  json body = json::parse(ex.req.body(), nullptr, false);
  auto it = body.is_object() ? body.find("lora_name") : body.end();
  if (!body.is_object() || it == body.end() || !it->is_string())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "'lora_name' must be given (a string)", "lora_name");
  const std::string name = it->get<std::string>();
  for (const auto& [key, value] : body.items())
    if (key != "lora_name")
      co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                  fmt::format("unknown field '{}' (lora_name)", key), key);
  if (!ctx_.stack.controller().adapters().unload(name))
    co_return co_await ex.error(http::status::not_found, "not_found_error",
                                fmt::format("no LoRA adapter named '{}' is loaded", name),
                                "lora_name");
  spdlog::info("LoRA adapter '{}' unloaded (requests using it finish with it)", name);
  co_await ex.respond(http::status::ok,
                      fmt::format("Success: LoRA adapter '{}' removed successfully.", name),
                      "text/plain");
}

asio::awaitable<std::optional<json>> OpenAiRoutes::tokenizer_request(HttpExchange& ex) {
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded()) {
    co_await ex.error(http::status::bad_request, "invalid_request_error",
                      "the body is not valid JSON");
    co_return std::nullopt;
  }
  if (auto m = body.find("model"); body.is_object() && m != body.end() && !m->is_null()) {
    if (!m->is_string() || m->get<std::string>() != model_.name) {
      co_await ex.error(http::status::not_found, "invalid_request_error",
                        fmt::format("the model {} does not exist; this server serves '{}'",
                                    m->dump(), model_.name),
                        "model");
      co_return std::nullopt;
    }
  }
  co_return body;
}

asio::awaitable<void> OpenAiRoutes::tokenize(HttpExchange& ex) {
  auto body = co_await tokenizer_request(ex);
  if (!body) co_return;
  json reply;
  std::optional<InvalidRequest> bad;
  try {
    reply =
        tokenize_response(*body, ctx_.stack.tokenizer(), *chat_template_, model_.context_length);
  } catch (const InvalidRequest& e) {
    bad = e;
  } catch (const std::exception& e) {
    bad = InvalidRequest("", e.what());
  }
  if (bad)
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error", bad->what(),
                                bad->param());
  co_await ex.respond_json(http::status::ok, reply);
}

asio::awaitable<void> OpenAiRoutes::detokenize(HttpExchange& ex) {
  auto body = co_await tokenizer_request(ex);
  if (!body) co_return;
  json reply;
  std::optional<InvalidRequest> bad;
  try {
    reply = detokenize_response(*body, ctx_.stack.tokenizer());
  } catch (const InvalidRequest& e) {
    bad = e;
  }
  if (bad)
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error", bad->what(),
                                bad->param());
  co_await ex.respond_json(http::status::ok, reply);
}

asio::awaitable<std::optional<CompletionRequest>> OpenAiRoutes::completion_request(
    HttpExchange& ex, const json& body, const nlohmann::ordered_json* ordered, bool chat,
    void (*rename)(std::string& param, std::string& message)) {
  const Tokenizer& tokenizer = ctx_.stack.tokenizer();
  CompletionRequest req;
  std::optional<InvalidRequest> bad;
  try {
    std::random_device rd;
    req = parse_completion_request(body, chat, tokenizer, *chat_template_, model_.context_length,
                                   (uint64_t(rd()) << 32) | rd(), ordered, model_.tool_format);
  } catch (const InvalidRequest& e) {
    bad = e;
  } catch (const std::exception& e) {  // the tokenizer or the template: still the request's
    bad = InvalidRequest("", e.what());
  }
  if (bad) {
    std::string message = bad->what(), param = bad->param();
    if (rename) rename(param, message);
    co_await ex.error(http::status::bad_request, "invalid_request_error", message, param);
    co_return std::nullopt;
  }
  req.reasoning = model_.reasoning;
  if (model_.reasoning_from_template && req.chat)
    req.reasoning = format_for_prompt(req.reasoning, req.prompt_opens_thought);
  // A grammar (a forced tool call, response_format) shapes the output from its first token, so
  // it holds no thought that the prompt opened.
  if (!req.grammar.empty() && req.reasoning == ReasoningFormat::DeepSeekR1)
    req.reasoning = ReasoningFormat::Qwen3;
  if (!req.model.empty() && req.model != model_.name) {
    if (ctx_.stack.controller().adapters().open(req.model)) {
      req.adapter = req.model;  // a LoRA adapter of the base model
    } else {
      const std::string message = fmt::format(
          "the model '{}' does not exist; this server serves {}", req.model, served_names());
      co_await ex.error(http::status::not_found, "invalid_request_error", message, "model");
      co_return std::nullopt;
    }
  }
  co_return req;
}

asio::awaitable<void> OpenAiRoutes::completion(HttpExchange& ex, bool chat,
                                               const std::string& owner) {
  const auto t_request = Clock::now();
  ctx_.metrics
      .counter("pith_openai_requests_total", "OpenAI-compatible requests",
               chat ? "endpoint=\"chat\"" : "endpoint=\"completions\"")
      .inc();
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "the body is not valid JSON");
  // Parsed again with members in the order sent, for response_format's property order.
  nlohmann::ordered_json ordered;
  if (body.is_object() &&
      (body.contains("response_format") || body.contains("tools") || body.contains("functions")))
    ordered = nlohmann::ordered_json::parse(ex.req.body(), nullptr, false);
  auto req = co_await completion_request(ex, body, &ordered, chat, nullptr);
  if (!req) co_return;
  // (Locals, not temporaries, in co_await expressions: GCC 12 destroys those wrongly.)
  const SseFrames frames = [](const std::vector<json>& chunks) {
    std::string out;
    for (const auto& c : chunks) out += "data: " + json_text(c) + "\n\n";
    return out;
  };
  std::string id = (chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
  Generation g = co_await generate(ex, *req, owner, std::move(id), "", frames, t_request);
  if (!g.session) co_return;
  if (g.failure) {
    const FailureResponse answer = failure_response(g.failure->code);
    if (!req->stream)
      co_return co_await ex.error(static_cast<http::status>(answer.http_status), answer.type,
                                  g.failure->text);
    json err = {
        {"error",
         {{"message", g.failure->text}, {"type", answer.type}, {"code", answer.http_status}}}};
    co_await ex.write_chunk("data: " + json_text(err) + "\n\n");
    co_await ex.write_chunk("data: [DONE]\n\n");
    co_return co_await ex.end_stream();
  }
  std::vector<json> last = g.session->finish();
  if (!req->stream) {
    const json response = g.session->response();
    co_return co_await ex.respond_json(http::status::ok, response);
  }
  const std::string tail = frames(last);
  if (!co_await ex.write_chunk(tail)) co_return;
  co_await ex.write_chunk("data: [DONE]\n\n");
  co_await ex.end_stream();
}

asio::awaitable<OpenAiRoutes::Generation> OpenAiRoutes::generate(
    HttpExchange& ex, const CompletionRequest& req, const std::string& owner, std::string id,
    std::string opening, const SseFrames& frames, Clock::time_point t_request) {
  Generation g;
  Metrics& metrics = ctx_.metrics;
  auto hash = ctx_.programs.builtin_hash(kCompletionProgram);
  if (!hash) {
    co_await ex.error(http::status::service_unavailable, "unavailable",
                      "the built-in completion inferlet is not available");
    co_return g;
  }
  Launched l = launcher_.launch(*hash, req.inferlet_args(), owner, true);
  if (l.error) {
    co_await ex.error(l.error->status, l.error->type, l.error->message);
    co_return g;
  }
  auto rec = l.record;
  auto end_instance = [&rec](const char* why) {
    if (auto inst = rec->live()) inst->terminate(why);
  };

  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  auto session = std::make_unique<CompletionSession>(
      req, ctx_.stack.tokenizer(), id, req.adapter.empty() ? model_.name : req.adapter, created);
  auto& ttft = metrics.histogram("pith_time_to_first_token_seconds",
                                 "Time from request to first generated token",
                                 exponential_buckets(0.001, 2, 16));
  auto& itl = metrics.histogram("pith_inter_token_latency_seconds",
                                "Time between generated tokens of a request",
                                exponential_buckets(0.0005, 2, 16));
  auto& gen_tokens =
      metrics.counter("pith_generation_tokens_total", "Tokens generated for OpenAI requests");
  if (req.stream && (!co_await ex.begin_stream("text/event-stream") ||
                     (!opening.empty() && !co_await ex.write_chunk(opening)))) {
    end_instance("client disconnected");
    co_return g;
  }
  ex.watch_hangup();  // a client that goes away stops its generation
  // The failure that ends the request, with the ABI status that decides the HTTP answer.
  std::optional<proto::ErrorMessage> failure;
  std::optional<runtime::ExitStatus> exit;
  Clock::time_point last_token{};
  // Streams carry an SSE comment after 10 s of silence (a request queued behind others under
  // load): proxies with read timeouts (nginx: 60 s) keep the connection, and OpenAI's clients
  // skip comment lines.
  Clock::time_point last_write = Clock::now();
  uint64_t after = 0;
  bool gone = false;
  while (!failure && !gone) {
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
      const uint64_t tokens_before = session->token_messages();
      try {
        chunks = session->on_message(e.text);
      } catch (const std::exception& err) {
        failure = proto::ErrorMessage{PITH_ERR_INTERNAL, err.what()};
        break;
      }
      if (session->failure()) {
        failure = proto::ErrorMessage{session->failure()->code,
                                      "generation failed: " + session->failure()->text};
        break;
      }
      if (session->token_messages() > tokens_before) {
        const auto now = Clock::now();
        if (last_token == Clock::time_point{})
          ttft.observe(std::chrono::duration<double>(now - t_request).count());
        else
          itl.observe(std::chrono::duration<double>(now - last_token).count());
        last_token = now;
        gen_tokens.inc();
      }
      if (chunks.empty()) continue;
      if (std::string text = frames(chunks); !text.empty()) {
        if (!co_await ex.write_chunk(text)) {
          gone = true;
          break;
        }
        last_write = Clock::now();
      }
    }
    if (session->all_done() || exit || r.closed) break;
    if (req.stream && !gone && Clock::now() - last_write > std::chrono::seconds(10)) {
      if (!co_await ex.write_chunk(": keep-alive\n\n")) gone = true;
      last_write = Clock::now();
    }
    if (ex.client_gone()) {
      gone = true;
      break;
    }
    co_await rec->events->wait(after, std::chrono::milliseconds(250));
  }
  if (gone) {
    end_instance("client disconnected");
    co_return g;
  }
  if (!session->all_done() && !failure) {
    // The inferlet ended (or was ended) before finishing every choice.
    pith_status_t ended_by = PITH_OK;
    {
      std::lock_guard lock(rec->mu);
      if (!exit) exit = rec->exit;
      ended_by = rec->ended_by;
    }
    const bool clean = exit && exit->kind == runtime::ExitStatus::Kind::Exited && exit->code == 0;
    if (!clean)
      failure =
          proto::ErrorMessage{ended_by != PITH_OK ? ended_by : PITH_ERR_INTERNAL,
                              exit ? exit->reason : "the completion inferlet ended unexpectedly"};
  }
  end_instance("finished");
  metrics.counter("pith_prompt_tokens_total", "Prompt tokens of OpenAI requests")
      .inc(session->prompt_tokens());
  metrics
      .counter("pith_prompt_tokens_cached_total",
               "Prompt tokens of OpenAI requests served by the prefix cache")
      .inc(session->cached_tokens());
  if (session->accepted_prediction_tokens() + session->rejected_prediction_tokens() > 0) {
    metrics
        .counter("pith_prediction_accepted_tokens_total",
                 "Draft tokens of predicted outputs that completions took")
        .inc(session->accepted_prediction_tokens());
    metrics
        .counter("pith_prediction_rejected_tokens_total",
                 "Draft tokens of predicted outputs verified and discarded")
        .inc(session->rejected_prediction_tokens());
  }
  if (failure)
    metrics.counter("pith_openai_failures_total", "OpenAI requests that failed during generation")
        .inc();
  g.session = std::move(session);
  g.failure = std::move(failure);
  co_return g;
}

}  // namespace pith::server
