// ServerContext: what the route families of `pith serve` share once the model is loaded — the
// checked settings, the I/O context, metrics, the instance registry and the serving stack with
// its program store. Owned by ApiServer; the routes hold a reference.
#pragma once

#include <atomic>
#include <string>

#include "server/http_server.h"
#include "server/instance_registry.h"
#include "server/metrics.h"
#include "server/program_store.h"
#include "server/serve_settings.h"

namespace pith {
class ServingStack;
}

namespace pith::server {

struct ServerContext {
  const ServeSettings& settings;
  asio::io_context& io;
  Metrics& metrics;
  InstanceRegistry& registry;
  ServingStack& stack;
  ProgramStore& programs;
  const std::atomic<bool>& stopping;
};

// JSON text for bodies and events; invalid UTF-8 from a guest is replaced, never thrown on.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pith::server
