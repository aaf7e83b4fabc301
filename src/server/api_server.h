// ApiServer: `pith serve`, the wiring of the HTTP server. The options are checked before
// anything else (serve_settings.h: a bad option ends startup without listening); then it
// listens (GET /health answers 503 while the model loads), loads the ServingStack on a
// background thread and routes requests to the route families — programs, instances + SSE,
// OpenAI-compatible endpoints (run by the built-in openai_completion inferlet, the same path as
// user programs) — and Prometheus metrics, all on one I/O thread (docs/server-api.md).
// SIGINT/SIGTERM: stop accepting, end running instances with a reason, exit 0.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "server/http_server.h"
#include "server/instance_launcher.h"
#include "server/instance_registry.h"
#include "server/metrics.h"
#include "server/program_store.h"
#include "server/serve_config.h"
#include "server/serve_settings.h"
#include "server/server_context.h"
#include "server/serving_metrics.h"

namespace pith {
class ServingStack;
}

namespace pith::server {

class InstanceRoutes;
class OpenAiRoutes;
class ProgramRoutes;

class ApiServer {
 public:
  // Throws pith::Error for an invalid option (before any port is opened).
  explicit ApiServer(ServeConfig config);
  ~ApiServer();

  // Serves until SIGINT/SIGTERM (or a model load failure). Returns the process exit code.
  int run();

 private:
  void load_model();
  asio::awaitable<void> handle(HttpExchange& ex);
  asio::awaitable<void> route(HttpExchange& ex, const std::string& key);
  asio::awaitable<void> housekeeping();
  asio::awaitable<void> shutdown();
  // Waits (polling) until `done()` or `deadline`, or a second signal asked to stop at once.
  asio::awaitable<void> wait_until(std::function<bool()> done,
                                   std::chrono::steady_clock::time_point deadline);
  bool serves_request(const InstanceRecord& r) const;  // an OpenAI request's instance
  bool authorized(const HttpExchange& ex, std::string& key) const;

  const ServeSettings settings_;
  asio::io_context io_;
  Metrics metrics_;
  InstanceRegistry registry_;
  CompileTimes compile_times_;
  StatsLog stats_log_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> ready_{false}, stopping_{false};
  std::atomic<bool> draining_{false}, force_stop_{false};
  std::atomic<int> exit_code_{0};
  std::thread loader_;
  int64_t started_unix_ = 0;

  // Set by the loader before ready_ (then read-only).
  std::unique_ptr<ServingStack> stack_;
  std::unique_ptr<ProgramStore> programs_;
  std::optional<ServerContext> context_;
  std::unique_ptr<InstanceLauncher> launcher_;
  std::unique_ptr<ProgramRoutes> program_routes_;
  std::unique_ptr<InstanceRoutes> instance_routes_;
  std::unique_ptr<OpenAiRoutes> openai_routes_;
  std::string model_name_;
};

}  // namespace pith::server
