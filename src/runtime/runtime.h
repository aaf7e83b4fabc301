// Runtime: the application layer's context object. It owns the native compiler and its cache,
// the scheduler threads, the key-value store and the pub/sub registry, and launches instances
// of uploaded programs. Several runtimes can live in one process (tests do); nothing is global
// except the signal handlers and the wasm-rt function-type registry (see guest_execution.h).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/http_client.h"
#include "runtime/instance.h"
#include "runtime/kv_store.h"
#include "runtime/native_compiler.h"
#include "runtime/program.h"
#include "runtime/pubsub.h"
#include "runtime/shared_state.h"

namespace pith::runtime {

class Scheduler;
class ModelApi;

struct RuntimeConfig {
  NativeCompilerConfig compiler;  // compiler.cache_dir "" = default_cache_dir()
  int threads = 1;                // scheduler threads; instances are spread round-robin
  uint64_t cpu_tick_ns = 10'000'000;
  InstanceLimits limits;  // defaults for launches
  KvStoreLimits store;
  ModelApi* model = nullptr;  // not owned; nullptr = no model (run-local)
  // Inferlet HTTP (abi.h "HTTP"): the hosts guests may reach, "host" (any port) or "host:port"
  // (pith run/serve --inferlet-http-allow). Empty = HTTP disabled: calls return
  // PITH_ERR_NOT_ENABLED and the instance log says so.
  std::vector<std::string> http_allow;
  uint32_t http_timeout_ms = 10'000;         // per request, connect included
  size_t http_max_response_bytes = 4 << 20;  // larger responses fail with PITH_ERR_LIMIT
  bool http_allow_private = false;  // listed names may resolve to loopback/private addresses
  TierPolicy tiers = TierPolicy::Auto;
  // redis://… : the key-value store, pub/sub, programs and export records live there, shared
  // with every runtime given the same URL (shared_state.h). Empty: this process only.
  std::string state_store;
  std::string replica = "local";  // this runtime's name in export records
};

// default_cache_root() (common/cache_dir.h) + "/native".
std::string default_cache_dir();

class Runtime {
 public:
  explicit Runtime(RuntimeConfig config);
  ~Runtime();  // kills and waits for all instances
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Registers module bytes; the native build starts in the background.
  std::shared_ptr<Program> load_program(std::string wasm);
  std::shared_ptr<Program> load_program_file(const std::string& path);

  // Starts an instance. args[0] is the program name seen by the guest. Waits for the program's
  // native build if it is still running. Throws pith::Error if the build failed.
  std::shared_ptr<Instance> launch(const std::shared_ptr<Program>& program,
                                   std::vector<std::string> args, EventSink sink = {},
                                   std::optional<InstanceLimits> limits = std::nullopt);

  KvStore& store() { return shared_ ? static_cast<KvStore&>(*shared_) : local_store_; }
  SharedState* shared_state() { return shared_.get(); }  // nullptr without --state-store
  PubSub& pubsub() { return pubsub_; }
  HttpClient* http() { return http_.get(); }  // nullptr when HTTP is disabled
  const NativeCompiler& compiler() const { return *compiler_; }
  size_t live_instances() const;

 private:
  RuntimeConfig config_;
  std::shared_ptr<const NativeCompiler> compiler_;
  LocalKvStore local_store_;
  PubSub pubsub_;
  std::unique_ptr<SharedState> shared_;  // after pubsub_: its subscriber delivers into it
  std::unique_ptr<HttpClient> http_;  // outlives the schedulers: instances call it until they end
  std::vector<std::unique_ptr<Scheduler>> schedulers_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace pith::runtime
