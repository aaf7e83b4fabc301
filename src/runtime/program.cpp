// Uploaded modules and their background native build. See program.h.
#include "runtime/program.h"

#include "runtime/native_compiler.h"
#include "runtime/native_module.h"

namespace pith::runtime {

Program::Program(std::string wasm, const NativeCompiler& compiler)
    : wasm_(std::move(wasm)), hash_(sha256_hex(wasm_)) {
  std::string cached = compiler.cached(wasm_);
  if (!cached.empty()) {
    std::promise<std::shared_ptr<const NativeModule>> p;
    try {
      p.set_value(NativeModule::load(cached));
    } catch (...) {
      p.set_exception(std::current_exception());
    }
    native_ = p.get_future().share();
    return;
  }
  // The compiler outlives programs (both owned by the Runtime, compiler declared first).
  native_ = std::async(std::launch::async, [this, &compiler]() {
              auto t0 = std::chrono::steady_clock::now();
              std::string so = compiler.compile(wasm_);
              compile_seconds_ = std::chrono::duration<double>(
                                     std::chrono::steady_clock::now() - t0).count();
              return std::shared_ptr<const NativeModule>(NativeModule::load(so));
            }).share();
}

Program::~Program() {
  if (native_.valid()) native_.wait();  // never leave the builder thread running on `this`
}

bool Program::native_ready() const {
  return native_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::shared_ptr<const NativeModule> Program::native() { return native_.get(); }

}  // namespace pith::runtime
