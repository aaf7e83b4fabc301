// The instance routes: POST /v1/instances (launch), GET /v1/instances, and per instance
// GET|DELETE /v1/instances/{id}, POST .../messages, POST .../close and the SSE stream
// GET .../events (resumable with ?after= or Last-Event-ID). A non-detached instance whose last
// event stream closes is ended after the orphan grace period.
#pragma once

#include <memory>
#include <string>

#include "server/instance_launcher.h"
#include "server/server_context.h"

namespace pith::server {

class InstanceRoutes {
 public:
  InstanceRoutes(ServerContext& ctx, InstanceLauncher& launcher) : ctx_(ctx), launcher_(launcher) {}

  asio::awaitable<void> create(HttpExchange& ex, const std::string& owner);
  asio::awaitable<void> list(HttpExchange& ex);
  // `action`: "" (the instance itself), messages, close or events.
  asio::awaitable<void> instance(HttpExchange& ex, const std::string& id,
                                 const std::string& action);

 private:
  asio::awaitable<void> event_stream(HttpExchange& ex, std::shared_ptr<InstanceRecord> rec);
  void stream_opened(const std::shared_ptr<InstanceRecord>& rec);
  void stream_closed(const std::shared_ptr<InstanceRecord>& rec);

  ServerContext& ctx_;
  InstanceLauncher& launcher_;
};

}  // namespace pith::server
