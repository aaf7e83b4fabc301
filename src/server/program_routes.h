// The program routes: POST /v1/programs (upload a .wasm, ?name=), GET /v1/programs,
// GET|HEAD|DELETE /v1/programs/{hash}.
#pragma once

#include <string>

#include "server/server_context.h"

namespace pith::server {

class ProgramRoutes {
 public:
  explicit ProgramRoutes(ServerContext& ctx) : ctx_(ctx) {}

  asio::awaitable<void> upload(HttpExchange& ex);
  asio::awaitable<void> list(HttpExchange& ex);
  asio::awaitable<void> program(HttpExchange& ex, const std::string& hash);

 private:
  ServerContext& ctx_;
};

}  // namespace pith::server
