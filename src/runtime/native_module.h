// NativeModule: a compiled inferlet loaded with dlopen (RTLD_LOCAL, so every module can use the
// same generated names). It exposes the shim's stable entry points; an instance is a block of
// instance_size() zeroed bytes that instantiate() fills. Loading runs the module's one-time
// init (function-type registration). Unloaded when the last shared_ptr goes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/guest_module.h"

namespace pith::runtime {

class NativeModule final : public GuestModule {
 public:
  // Throws pith::Error if the object cannot be loaded or lacks the shim symbols.
  static std::shared_ptr<NativeModule> load(const std::string& so_path);
  ~NativeModule();
  NativeModule(const NativeModule&) = delete;
  NativeModule& operator=(const NativeModule&) = delete;

  const char* tier() const override { return "native"; }
  // The trap boundary: sigsetjmp here, then instantiate + _start; a trap, proc_exit or kill
  // siglongjmps back and the module instance (linear memory, tables) is freed either way.
  TrapCode run(Instance& instance) const override;
  size_t instance_size() const { return instance_size_; }
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
