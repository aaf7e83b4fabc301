#include "server/program_routes.h"

#include <fmt/format.h>

namespace pith::server {

using nlohmann::json;

namespace {

json program_entry(const ProgramInfo& p) {
  json j = {{"hash", p.hash},
            {"size", p.size},
            {"uploaded_at", p.uploaded_at},
            {"native_ready", p.native_ready},
            {"builtin", p.builtin}};
  if (!p.name.empty()) j["name"] = p.name;
  return j;
}

}  // namespace

asio::awaitable<void> ProgramRoutes::upload(HttpExchange& ex) {
  std::string body = std::move(ex.req.body());
  if (body.empty())
    co_return co_await ex.error(http::status::bad_request, "bad_request",
                                "empty upload: send the .wasm bytes as the body");
  std::pair<ProgramInfo, bool> r;
  std::string invalid, unstored;
  try {
    r = ctx_.programs.upload(std::move(body), ex.query.count("name") ? ex.query["name"] : "");
  } catch (const ProgramStorageError& e) {
    unstored = e.what();
  } catch (const std::exception& e) {
    invalid = e.what();
  }
  if (!unstored.empty()) {
    ctx_.metrics.counter("pith_program_uploads_total", "Program uploads", "result=\"unstored\"")
        .inc();
    co_return co_await ex.error(http::status::insufficient_storage, "insufficient_storage",
                                "the program is valid but could not be stored: " + unstored);
  }
  if (!invalid.empty()) {
    ctx_.metrics.counter("pith_program_uploads_total", "Program uploads", "result=\"invalid\"")
        .inc();
    co_return co_await ex.error(http::status::bad_request, "bad_request",
                                "invalid program: " + invalid);
  }
  ctx_.metrics
      .counter("pith_program_uploads_total", "Program uploads",
               r.second ? "result=\"existing\"" : "result=\"new\"")
      .inc();
  json reply = {{"hash", r.first.hash}, {"size", r.first.size}, {"existing", r.second}};
  co_await ex.respond_json(r.second ? http::status::ok : http::status::created, reply);
}

asio::awaitable<void> ProgramRoutes::list(HttpExchange& ex) {
  json list = json::array();
  for (const auto& p : ctx_.programs.list()) list.push_back(program_entry(p));
  json reply = {{"programs", list}};
  co_await ex.respond_json(http::status::ok, reply);
}

asio::awaitable<void> ProgramRoutes::program(HttpExchange& ex, const std::string& hash) {
  const auto method = ex.req.method();
  auto p = ctx_.programs.find(hash);
  if (!p)
    co_return co_await ex.error(http::status::not_found, "not_found",
                                fmt::format("program {} is not uploaded", hash));
  if (method == http::verb::get || method == http::verb::head)
    co_return co_await ex.respond_json(http::status::ok, program_entry(*p));
  if (method == http::verb::delete_) {
    std::string err;
    try {
      ctx_.programs.remove(hash);
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (!err.empty()) co_return co_await ex.error(http::status::bad_request, "bad_request", err);
    co_return co_await ex.respond(http::status::no_content, "");
  }
  co_await ex.error(http::status::method_not_allowed, "bad_request",
                    "use GET, HEAD or DELETE on a program");
}

}  // namespace pith::server
