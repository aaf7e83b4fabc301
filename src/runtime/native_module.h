// NativeModule: a compiled inferlet loaded with dlopen (RTLD_LOCAL, so every module can use the
// same generated names). It exposes the shim's stable entry points; an instance is a block of
// instance_size() zeroed bytes that instantiate() fills. Loading runs the module's one-time
// init (function-type registration). Unloaded when the last shared_ptr goes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace pith::runtime {

class NativeModule {
 public:
  // Throws pith::Error if the object cannot be loaded or lacks the shim symbols.
  static std::shared_ptr<NativeModule> load(const std::string& so_path);
  ~NativeModule();
  NativeModule(const NativeModule&) = delete;
  NativeModule& operator=(const NativeModule&) = delete;

  size_t instance_size() const { return instance_size_; }
  // Must run on the instance's fiber inside run_guarded (it may trap).
  void instantiate(void* instance, void* host) const { instantiate_(instance, host); }
  void start(void* instance) const { start_(instance); }
  void free_instance(void* instance) const { free_(instance); }
  const std::string& path() const { return path_; }

 private:
  NativeModule() = default;
  void* handle_ = nullptr;
  std::string path_;
  size_t instance_size_ = 0;
  void (*instantiate_)(void*, void*) = nullptr;
  void (*start_)(void*) = nullptr;
  void (*free_)(void*) = nullptr;
};

}  // namespace pith::runtime
