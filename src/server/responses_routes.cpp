// OpenAI's Responses API on the chat machinery: a request is translated into its chat
// equivalent (responses_request.h), run by the completion inferlet through the same
// OpenAiRoutes::generate as /v1/chat/completions, and its CompletionSession chunks rebuilt as a
// response object or Responses stream events (responses_output.h). Stored responses live in a
// ResponsesStore (responses_store.h).
#include <fmt/format.h>

#include "server/openai_routes.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/responses_store.h"

namespace pith::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string json_body(const ojson& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

asio::awaitable<void> respond_ordered(HttpExchange& ex, const ojson& body) {
  std::string text = json_body(body);
  co_await ex.respond(http::status::ok, std::move(text));
}

// (Built outside the coroutines, and passed to co_await as locals: GCC 12 miscompiles brace-init
// lists in coroutine frames and destroys temporaries of co_await expressions wrongly.)
ojson deleted_object(const std::string& id) {
  return {{"id", id}, {"object", "response"}, {"deleted", true}};
}

ResponsesUsage usage_of(const CompletionSession& session) {
  return {session.prompt_tokens(), session.cached_tokens(), session.completion_tokens()};
}

void store_response(ResponsesStore& store, const ResponseBuilder& builder,
                    const ojson& input_items) {
  store.put(builder.id(), {builder.response(), conversation_after(input_items, builder.output())});
}

}  // namespace

asio::awaitable<void> OpenAiRoutes::responses(HttpExchange& ex, const std::string& owner) {
  const auto t_request = Clock::now();
  ctx_.metrics
      .counter("pith_openai_requests_total", "OpenAI-compatible requests", "endpoint=\"responses\"")
      .inc();
  ojson body = ojson::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded())
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error",
                                "the body is not valid JSON");
  ResponsesStore& store = *responses_store_;
  auto lookup = [&store](const std::string& id) -> std::optional<ojson> {
    auto stored = store.get(id);
    if (!stored) return std::nullopt;
    return std::move(stored->conversation);
  };
  ResponsesRequest r;
  std::optional<InvalidRequest> bad;
  std::optional<std::string> unknown;
  try {
    r = translate_responses_request(body, lookup);
  } catch (const InvalidRequest& e) {
    bad = e;
  } catch (const UnknownResponse& e) {
    unknown = e.what();
  }
  if (bad)
    co_return co_await ex.error(http::status::bad_request, "invalid_request_error", bad->what(),
                                bad->param());
  if (unknown)
    co_return co_await ex.error(http::status::not_found, "invalid_request_error", *unknown,
                                "previous_response_id");
  const json chat_body = r.chat_body;
  auto req = co_await completion_request(ex, chat_body, &r.chat_body, true, &responses_wording);
  if (!req) co_return;

  const int64_t created_at = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  ResponseBuilder builder("resp_" + random_hex(48),
                          req->adapter.empty() ? model_.name : req->adapter, created_at, r.echo);
  const SseFrames frames = [&builder](const std::vector<json>& chunks) {
    std::string out;
    for (const auto& c : chunks)
      for (const auto& e : builder.on_chunk(c)) out += sse_event(e);
    return out;
  };
  std::string opening;
  if (r.stream)
    for (const auto& e : builder.start()) opening += sse_event(e);
  std::string chat_id = "chatcmpl-" + random_hex(24);
  Generation g =
      co_await generate(ex, *req, owner, std::move(chat_id), std::move(opening), frames, t_request);
  if (!g.session) co_return;
  if (g.failure) {
    const FailureResponse answer = failure_response(g.failure->code);
    if (!r.stream)
      co_return co_await ex.error(static_cast<http::status>(answer.http_status), answer.type,
                                  g.failure->text);
    std::string out;
    for (const auto& e : builder.fail(g.failure->text)) out += sse_event(e);
    co_await ex.write_chunk(out);
    co_return co_await ex.end_stream();
  }
  std::vector<json> last = g.session->finish();
  const ResponsesUsage usage = usage_of(*g.session);
  std::string tail;
  if (r.stream) {
    tail = frames(last);
    for (const auto& e : builder.finish(usage)) tail += sse_event(e);
  } else {
    builder.set_chat_completion(g.session->response(), usage);
  }
  if (r.store) store_response(store, builder, r.input_items);
  if (!r.stream) {
    const ojson response = builder.response();
    co_return co_await respond_ordered(ex, response);
  }
  if (!co_await ex.write_chunk(tail)) co_return;
  co_await ex.end_stream();
}

asio::awaitable<void> OpenAiRoutes::stored_response(HttpExchange& ex, const std::string& id) {
  const auto method = ex.req.method();
  if (method != http::verb::get && method != http::verb::delete_) {
    const std::string message =
        fmt::format("{} is not allowed on {}", std::string(ex.req.method_string()), ex.path);
    co_return co_await ex.error(http::status::method_not_allowed, "bad_request", message);
  }
  const std::string not_found = fmt::format("no stored response '{}'", id);
  if (method == http::verb::delete_) {
    if (!responses_store_->erase(id))
      co_return co_await ex.error(http::status::not_found, "invalid_request_error", not_found,
                                  "response_id");
    const ojson deleted = deleted_object(id);
    co_return co_await respond_ordered(ex, deleted);
  }
  auto stored = responses_store_->get(id);
  if (!stored)
    co_return co_await ex.error(http::status::not_found, "invalid_request_error", not_found,
                                "response_id");
  co_await respond_ordered(ex, stored->response);
}

}  // namespace pith::server
