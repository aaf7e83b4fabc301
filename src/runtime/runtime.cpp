// The runtime context object. See runtime.h.
#include "runtime/runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/cache_dir.h"
#include "common/error.h"
#include "common/read_file.h"
#include "runtime/guest_module.h"
#include "runtime/scheduler.h"

namespace pith::runtime::api {
size_t host_import_table(const void* const** table);  // api/host_imports.cpp
}

namespace pith::runtime {

std::string default_cache_dir() {
  return default_cache_root() + "/native";
}

namespace {
// The tools found when pith was built, unless the environment names others: PITH_CC and
// PITH_WASM2C, for a machine whose C compiler or wabt lives elsewhere than on the build machine
// (a GPU machine running a packed build; wasm-rt.h is then found through the compiler's own
// CPATH).
std::string tool(const std::string& configured, const char* plain, const char* env,
                 const char* built) {
  if (!configured.empty() && configured != plain) return configured;
  const char* e = std::getenv(env);
  return e != nullptr && *e != '\0' ? e : built;
}

NativeCompilerConfig with_defaults(NativeCompilerConfig c) {
  if (c.cache_dir.empty()) c.cache_dir = default_cache_dir();
  c.cc = tool(c.cc, "cc", "PITH_CC", PITH_DEFAULT_CC);
  c.wasm2c = tool(c.wasm2c, "wasm2c", "PITH_WASM2C", PITH_DEFAULT_WASM2C);
  return c;
}
}  // namespace

Runtime::Runtime(RuntimeConfig config)
    : config_(std::move(config)),
      compiler_(std::make_shared<const NativeCompiler>(with_defaults(config_.compiler))),
      local_store_(config_.store) {
  const void* const* imports = nullptr;
  PITH_CHECK(api::host_import_table(&imports) > 0 && imports[0] != nullptr);
  if (config_.threads < 1) fail("runtime: threads must be >= 1 (got {})", config_.threads);
  if (!config_.http_allow.empty())
    http_ = std::make_unique<HttpClient>(
        HttpConfig{.allow = config_.http_allow,
                   .timeout_ms = config_.http_timeout_ms,
                   .max_response_bytes = config_.http_max_response_bytes,
                   .allow_private = config_.http_allow_private});
  if (!config_.state_store.empty()) {
    shared_ = std::make_unique<SharedState>(config_.state_store, config_.store, config_.replica);
    pubsub_.set_relay(shared_.get());
    shared_->deliver_to(&pubsub_);
  }
  for (int i = 0; i < config_.threads; ++i)
    schedulers_.push_back(std::make_unique<Scheduler>(config_.cpu_tick_ns));
}

Runtime::~Runtime() {
  schedulers_.clear();  // ends every instance first; then in-flight HTTP is aborted
  http_.reset();
}

std::shared_ptr<Program> Runtime::load_program(std::string wasm) {
  if (wasm.size() < 8 || wasm.compare(0, 4, std::string("\0asm", 4)) != 0)
    fail("not a WebAssembly module (bad magic)");
  return std::make_shared<Program>(std::move(wasm), compiler_, config_.tiers);
}

std::shared_ptr<Program> Runtime::load_program_file(const std::string& path) {
  std::string wasm = read_file(path);
  try {
    return load_program(std::move(wasm));
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

std::shared_ptr<Instance> Runtime::launch(const std::shared_ptr<Program>& program,
                                          std::vector<std::string> args, EventSink sink,
                                          std::optional<InstanceLimits> limits) {
  std::shared_ptr<const GuestModule> module = program->module_for_launch();
  uint64_t id = next_id_.fetch_add(1);
  Scheduler* sched = schedulers_[id % schedulers_.size()].get();
  InstanceServices services{sched, &store(), &pubsub_, shared_.get(), config_.model, http_.get()};
  auto inst =
      std::make_shared<Instance>(id, std::move(module), std::move(args),
                                 limits.value_or(config_.limits), services, std::move(sink));
  sched->start(inst);
  return inst;
}

size_t Runtime::live_instances() const {
  size_t n = 0;
  for (const auto& s : schedulers_) n += s->live();
  return n;
}

}  // namespace pith::runtime
