// The runtime context object. See runtime.h.
#include "runtime/runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "runtime/native_module.h"
#include "runtime/scheduler.h"

namespace pith::runtime {

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/pith/native";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pith/native";
  return "/tmp/pith-native-" + std::to_string(getuid());
}

namespace {
NativeCompilerConfig with_cache_dir(NativeCompilerConfig c) {
  if (c.cache_dir.empty()) c.cache_dir = default_cache_dir();
  return c;
}
}  // namespace

Runtime::Runtime(RuntimeConfig config)
    : config_(std::move(config)),
      compiler_(with_cache_dir(config_.compiler)),
      store_(config_.store) {
  if (config_.threads < 1) fail("runtime: threads must be >= 1 (got {})", config_.threads);
  for (int i = 0; i < config_.threads; ++i)
    schedulers_.push_back(std::make_unique<Scheduler>(config_.cpu_tick_ns));
}

Runtime::~Runtime() { schedulers_.clear(); }

std::shared_ptr<Program> Runtime::load_program(std::string wasm) {
  if (wasm.size() < 8 || wasm.compare(0, 4, std::string("\0asm", 4)) != 0)
    fail("not a WebAssembly module (bad magic)");
  return std::make_shared<Program>(std::move(wasm), compiler_);
}

std::shared_ptr<Program> Runtime::load_program_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return load_program(ss.str());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

std::shared_ptr<Instance> Runtime::launch(const std::shared_ptr<Program>& program,
                                          std::vector<std::string> args, EventSink sink,
                                          std::optional<InstanceLimits> limits) {
  std::shared_ptr<const NativeModule> module = program->native();
  uint64_t id = next_id_.fetch_add(1);
  Scheduler* sched = schedulers_[id % schedulers_.size()].get();
  InstanceServices services{sched, &store_, &pubsub_, config_.model, config_.http_enabled};
  auto inst = std::make_shared<Instance>(id, std::move(module), std::move(args),
                                         limits.value_or(config_.limits), services,
                                         std::move(sink));
  sched->start(inst);
  return inst;
}

size_t Runtime::live_instances() const {
  size_t n = 0;
  for (const auto& s : schedulers_) n += s->live();
  return n;
}

}  // namespace pith::runtime
