// ApiServer: `pith serve`. Listens first (GET /health answers 503 while the model loads), loads
// the ServingStack on a background thread, then serves the inferlet lifecycle API, the
// OpenAI-compatible endpoints (run by the built-in openai_completion inferlet, the same path
// as user programs) and Prometheus metrics, all on one I/O thread (docs/server-api.md).
// SIGINT/SIGTERM: stop accepting, end running instances with a reason, exit 0.
#pragma once

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "server/http_server.h"
#include "server/instance_registry.h"
#include "server/metrics.h"
#include "server/program_store.h"
#include "server/serve_config.h"

namespace pith {
class ServingStack;
class ChatTemplate;
}

namespace pith::server {

class ApiServer {
 public:
  explicit ApiServer(ServeConfig config);
  ~ApiServer();

  // Serves until SIGINT/SIGTERM (or a model load failure). Returns the process exit code.
  int run();

 private:
  struct LaunchError {
    http::status status;
    std::string type, message;
  };
  struct Launched {
    std::shared_ptr<InstanceRecord> record;
    std::optional<LaunchError> error;
  };

  void load_model();
  void register_metrics();
  asio::awaitable<void> handle(HttpExchange& ex);
  asio::awaitable<void> housekeeping();
  asio::awaitable<void> shutdown();

  // Routes.
  asio::awaitable<void> upload_program(HttpExchange& ex);
  asio::awaitable<void> programs(HttpExchange& ex, const std::string& hash);
  asio::awaitable<void> launch_instance(HttpExchange& ex, const std::string& owner);
  asio::awaitable<void> instance(HttpExchange& ex, const std::string& id, const std::string& action);
  asio::awaitable<void> event_stream(HttpExchange& ex, std::shared_ptr<InstanceRecord> rec);
  asio::awaitable<void> openai_completion(HttpExchange& ex, bool chat, const std::string& owner);

  Launched launch(const std::string& hash, std::vector<std::string> args, const std::string& owner, bool detach);
  nlohmann::json describe(const InstanceRecord& r) const;
  bool authorized(const HttpExchange& ex, std::string& key) const;
  void stream_opened(const std::shared_ptr<InstanceRecord>& rec);
  void stream_closed(const std::shared_ptr<InstanceRecord>& rec);

  ServeConfig cfg_;
  asio::io_context io_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::set<std::string> keys_;
  std::atomic<bool> ready_{false}, stopping_{false};
  std::atomic<int> exit_code_{0};
  std::thread loader_;
  int64_t started_unix_ = 0;

  // Set by the loader before ready_ (then read-only).
  std::unique_ptr<ServingStack> stack_;
  std::unique_ptr<ProgramStore> programs_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string model_name_;
  uint32_t context_length_ = 0;

  InstanceRegistry registry_;
  std::set<std::string> compile_observed_;  // programs whose compile time went into metrics
};

}  // namespace pith::server
