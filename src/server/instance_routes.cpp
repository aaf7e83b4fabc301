#include "server/instance_routes.h"

#include <fmt/format.h>

#include <boost/asio/steady_timer.hpp>
#include <optional>

namespace pith::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::optional<uint64_t> parse_id(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

asio::awaitable<void> InstanceRoutes::create(HttpExchange& ex, const std::string& owner) {
  json body = json::parse(ex.req.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    co_return co_await ex.error(http::status::bad_request, "bad_request",
                                "the body must be a JSON object {\"program\", \"args\"}");
  if (!body.contains("program") || !body["program"].is_string())
    co_return co_await ex.error(http::status::bad_request, "bad_request",
                                "'program' (a SHA-256 hex string) is required");
  std::vector<std::string> args;
  if (auto it = body.find("args"); it != body.end() && !it->is_null()) {
    if (!it->is_array())
      co_return co_await ex.error(http::status::bad_request, "bad_request",
                                  "'args' must be an array of strings");
    for (const auto& a : *it) {
      if (!a.is_string())
        co_return co_await ex.error(http::status::bad_request, "bad_request",
                                    "'args' must be an array of strings");
      args.push_back(a.get<std::string>());
    }
  }
  bool detach = true;
  if (auto it = body.find("detach"); it != body.end() && it->is_boolean()) detach = it->get<bool>();
  std::string hash = body["program"].get<std::string>();
  if (auto named = ctx_.programs.builtin_hash(hash)) hash = *named;  // built-ins also by name
  Launched l = launcher_.launch(hash, std::move(args), owner, detach);
  if (l.error) co_return co_await ex.error(l.error->status, l.error->type, l.error->message);
  json reply = {{"id", ctx_.registry.external_id(l.record->id)}};
  co_await ex.respond_json(http::status::created, reply);
}

asio::awaitable<void> InstanceRoutes::list(HttpExchange& ex) {
  json list = json::array();
  for (const auto& r : ctx_.registry.list()) list.push_back(launcher_.describe(*r));
  json reply = {{"instances", list}};
  co_await ex.respond_json(http::status::ok, reply);
}

void InstanceRoutes::stream_opened(const std::shared_ptr<InstanceRecord>& rec) {
  ++rec->streams;
  rec->had_stream = true;
  if (rec->orphan_timer) rec->orphan_timer->cancel();
}

void InstanceRoutes::stream_closed(const std::shared_ptr<InstanceRecord>& rec) {
  if (--rec->streams > 0 || rec->detach || rec->finished() || ctx_.stopping) return;
  // The client went away: give it a grace period to reconnect, then end the instance.
  auto timer = std::make_shared<asio::steady_timer>(ctx_.io);
  rec->orphan_timer = timer;
  timer->expires_after(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(ctx_.settings.config.orphan_grace_s)));
  timer->async_wait([rec, timer](const boost::system::error_code& ec) {
    if (ec || rec->streams > 0) return;
    if (auto inst = rec->live()) inst->terminate("client disconnected");
  });
}

asio::awaitable<void> InstanceRoutes::instance(HttpExchange& ex, const std::string& id_text,
                                               const std::string& action) {
  std::string why_not;
  auto id = ctx_.registry.parse_id(id_text, &why_not);
  auto rec = id ? ctx_.registry.find(*id) : nullptr;
  if (!rec && !why_not.empty())  // a proxy sent it astray, or the replica restarted
    co_return co_await ex.error(http::status::not_found, "not_found",
                                fmt::format("no instance {} here: {}", id_text, why_not));
  if (!rec)
    co_return co_await ex.error(http::status::not_found, "not_found",
                                fmt::format("no instance {}", id_text));
  const auto method = ex.req.method();
  if (action.empty()) {
    if (method == http::verb::get)
      co_return co_await ex.respond_json(http::status::ok, launcher_.describe(*rec));
    if (method == http::verb::delete_) {
      if (auto inst = rec->live()) inst->terminate("killed by client");
      json reply = {{"id", id_text}, {"state", rec->finished() ? "finished" : "terminating"}};
      co_return co_await ex.respond_json(http::status::accepted, reply);
    }
  } else if (action == "messages" && method == http::verb::post) {
    auto inst = rec->live();
    if (!inst)
      co_return co_await ex.error(http::status::conflict, "conflict", "the instance has finished");
    if (!inst->push_message(std::move(ex.req.body())))
      co_return co_await ex.error(http::status::conflict, "conflict",
                                  "the instance's inbox is closed or full");
    json reply = {{"id", id_text}};
    co_return co_await ex.respond_json(http::status::accepted, reply);
  } else if (action == "close" && method == http::verb::post) {
    if (auto inst = rec->live()) inst->close_input();
    json reply = {{"id", id_text}};
    co_return co_await ex.respond_json(http::status::accepted, reply);
  } else if (action == "events" && method == http::verb::get) {
    co_return co_await event_stream(ex, rec);
  } else if (action != "messages" && action != "close" && action != "events") {
    co_return co_await ex.error(http::status::not_found, "not_found",
                                fmt::format("no route for {}", ex.path));
  }
  co_await ex.error(
      http::status::method_not_allowed, "bad_request",
      fmt::format("{} is not allowed on {}", std::string(ex.req.method_string()), ex.path));
}

asio::awaitable<void> InstanceRoutes::event_stream(HttpExchange& ex,
                                                   std::shared_ptr<InstanceRecord> rec) {
  uint64_t after = 0;
  std::string from = ex.query.count("after") ? ex.query["after"] : ex.header("Last-Event-ID");
  if (!from.empty()) {
    auto v = parse_id(from);
    if (!v)
      co_return co_await ex.error(http::status::bad_request, "bad_request",
                                  "'after' / Last-Event-ID must be an event id");
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
    if (out.empty() && Clock::now() - last_write > std::chrono::seconds(2))
      out = ": keep-alive\n\n";
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

}  // namespace pith::server
