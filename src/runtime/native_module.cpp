// dlopen'ed wasm2c modules. See native_module.h.
#include "runtime/native_module.h"

#include <dlfcn.h>

#include <cstdlib>

#include "common/error.h"
#include "runtime/instance.h"

namespace pith::runtime {

std::shared_ptr<NativeModule> NativeModule::load(const std::string& so_path) {
  std::shared_ptr<NativeModule> m(new NativeModule);
  m->path_ = so_path;
  m->handle_ = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->handle_) fail("{}: cannot load compiled module: {}", so_path, dlerror());
  auto sym = [&](const char* name) {
    void* p = dlsym(m->handle_, name);
    if (!p) fail("{}: compiled module lacks {} (stale cache entry?)", so_path, name);
    return p;
  };
  auto size_fn = reinterpret_cast<size_t (*)()>(sym("pith_guest_instance_size"));
  auto init_fn = reinterpret_cast<void (*)()>(sym("pith_guest_init_module"));
  m->instantiate_ = reinterpret_cast<void (*)(void*, void*)>(sym("pith_guest_instantiate"));
  m->start_ = reinterpret_cast<void (*)(void*)>(sym("pith_guest_start"));
  m->free_ = reinterpret_cast<void (*)(void*)>(sym("pith_guest_free"));
  m->instance_size_ = size_fn();
  init_fn();  // registers function types; runs no guest code
  return m;
}

TrapCode NativeModule::run(Instance& instance) const {
  GuestExecution& exec = instance.exec();
  void* const guest = calloc(1, instance_size_);
  if (!guest) return TrapCode::HostError;
  volatile TrapCode end = TrapCode::None;  // volatile: written on both sides of the jump
  // Nothing with a destructor lives between here and the guest: a trap jumps back to this frame.
  int code = sigsetjmp(exec.trap_jmp, 1);
  if (code == 0) {
    exec.in_host = 0;
    instantiate_(guest, &instance);
    start_(guest);
  } else {
    end = static_cast<TrapCode>(code);
  }
  exec.in_host = 1;  // host code from here on: never a trap target again
  free_(guest);
  free(guest);
  return end;
}

NativeModule::~NativeModule() {
  if (handle_) dlclose(handle_);
}

}  // namespace pith::runtime
