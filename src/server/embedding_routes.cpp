// POST /v1/embeddings: the request is validated and tokenized here (embedding_api.h), its inputs
// computed by the built-in openai_embedding inferlet like any other instance (so they batch with
// everything else the server runs), and the vectors it sends (pith/embedding_protocol.hpp)
// become OpenAI's list of embeddings.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <pith/embedding_protocol.hpp>

#include "server/embedding_api.h"
#include "server/openai_routes.h"
#include "stack/serving_stack.h"

namespace pith::server {

using nlohmann::json;
namespace proto = openai_protocol;

asio::awaitable<void> OpenAiRoutes::embeddings(HttpExchange& ex, const std::string& owner) {
  ctx_.metrics
      .counter("pith_openai_requests_total", "OpenAI-compatible requests",
               "endpoint=\"embeddings\"")
      .inc();
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "the body is not valid JSON");
  EmbeddingRequest req;
  std::optional<InvalidRequest> bad;
  try {
    req = parse_embedding_request(body, ctx_.stack.tokenizer(), model_.context_length,
                                  ctx_.stack.weights().config.d_model);
  } catch (const InvalidRequest& e) {
    bad = e;
  } catch (const std::exception& e) {  // the tokenizer: still the request's
    bad = InvalidRequest("", e.what());
  }
  if (bad)
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error", bad->what(),
                                bad->param());
  if (!req.model.empty() && req.model != model_.name) {
    if (!ctx_.stack.controller().adapters().open(req.model)) {
      const std::string message = fmt::format(
          "the model '{}' does not exist; this server serves {}", req.model, served_names());
      co_return co_await ex.error(http::status::not_found, "invalid_request_error", message,
                                  "model");
    }
    req.adapter = req.model;
  }
  req.pooling = model_.pooling;
  auto hash = ctx_.programs.builtin_hash(kEmbeddingProgram);
  if (!hash)
    co_return co_await ex.error(http::status::service_unavailable, "unavailable",
                                "the built-in embedding inferlet is not available");
  Launched l = launcher_.launch(*hash, req.inferlet_args(), owner, true);
  if (l.error) co_return co_await ex.error(l.error->status, l.error->type, l.error->message);
  auto rec = l.record;
  auto end_instance = [&rec](const char* why) {
    if (auto inst = rec->live()) inst->terminate(why);
  };

  // One vector per input, in any order; the first error ends the request.
  std::vector<std::vector<float>> vectors(req.inputs.size());
  size_t received = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0;
  std::optional<proto::ErrorMessage> failure;
  std::optional<runtime::ExitStatus> exit;
  uint64_t after = 0;
  ex.watch_hangup();
  while (!failure && received < vectors.size()) {
    EventLog::Read r = rec->events->read_after(after);
    for (const auto& e : r.events) {
      after = e.id;
      if (e.type == "terminated") {
        std::lock_guard lock(rec->mu);
        exit = rec->exit;
        continue;
      }
      if (e.type != "message") continue;
      std::string why;
      if (e.text.starts_with("error ")) {
        proto::Message m;
        if (proto::parse(e.text, m, why) && std::holds_alternative<proto::ErrorMessage>(m))
          failure = std::get<proto::ErrorMessage>(m);
        else
          failure = proto::ErrorMessage{PITH_ERR_INTERNAL, "malformed inferlet message: " + why};
        break;
      }
      embedding_protocol::EmbeddingMessage m;
      if (!embedding_protocol::parse(e.text, m, why) || m.input >= vectors.size() ||
          !vectors[m.input].empty() || m.values.empty()) {
        failure =
            proto::ErrorMessage{PITH_ERR_INTERNAL, "malformed inferlet message: " +
                                                       (why.empty() ? "input out of order" : why)};
        break;
      }
      vectors[m.input] = std::move(m.values);
      prompt_tokens += m.prompt_tokens;
      cached_tokens += m.cached_tokens;
      ++received;
    }
    if (failure || received == vectors.size() || exit || r.closed) break;
    if (ex.client_gone()) {
      end_instance("client disconnected");
      co_return;
    }
    co_await rec->events->wait(after, std::chrono::milliseconds(250));
  }
  if (!failure && received < vectors.size()) {
    // The inferlet ended (or was ended) before sending every vector.
    pith_status_t ended_by = PITH_OK;
    {
      std::lock_guard lock(rec->mu);
      if (!exit) exit = rec->exit;
      ended_by = rec->ended_by;
    }
    failure =
        proto::ErrorMessage{ended_by != PITH_OK ? ended_by : PITH_ERR_INTERNAL,
                            exit ? exit->reason : "the embedding inferlet ended unexpectedly"};
  }
  end_instance("finished");
  ctx_.metrics.counter("pith_prompt_tokens_total", "Prompt tokens of OpenAI requests")
      .inc(prompt_tokens);
  ctx_.metrics
      .counter("pith_prompt_tokens_cached_total",
               "Prompt tokens of OpenAI requests served by the prefix cache")
      .inc(cached_tokens);
  if (failure) {
    ctx_.metrics
        .counter("pith_openai_failures_total", "OpenAI requests that failed during generation")
        .inc();
    const FailureResponse answer = failure_response(failure->code);
    co_return co_await ex.error(static_cast<http::status>(answer.http_status), answer.type,
                                "embedding failed: " + failure->text);
  }
  const json response = embedding_response(
      vectors, req.base64, req.adapter.empty() ? model_.name : req.adapter, prompt_tokens);
  co_await ex.respond_json(http::status::ok, response);
}

}  // namespace pith::server
