// dlopen'ed wasm2c modules. See native_module.h.
#include "runtime/native_module.h"

#include <dlfcn.h>

#include "common/error.h"

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

NativeModule::~NativeModule() {
  if (handle_) dlclose(handle_);
}

}  // namespace pith::runtime
