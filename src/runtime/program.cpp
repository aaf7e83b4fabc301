// Uploaded modules, their tiers and the background native build. See program.h.
#include "runtime/program.h"

#include <thread>

#include "common/error.h"
#include "runtime/interp_module.h"
#include "runtime/native_compiler.h"
#include "runtime/native_module.h"

namespace pith::runtime {

Program::Program(std::string wasm, std::shared_ptr<const NativeCompiler> compiler,
                 TierPolicy policy)
    : wasm_(std::move(wasm)), hash_(sha256_hex(wasm_)), policy_(policy) {
  std::string cached = policy_ == TierPolicy::InterpreterOnly ? "" : compiler->cached(wasm_);
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
  if (policy_ != TierPolicy::NativeOnly) interp_ = InterpModule::load(wasm_);  // throws if bad
  if (policy_ == TierPolicy::InterpreterOnly) return;
  // A detached builder that owns everything it touches (bytes, compiler, result slots), so
  // dropping a Program, or stopping the server, never waits for a C compiler still running.
  // (std::async would: its last future blocks in its destructor.)
  auto promise = std::make_shared<std::promise<std::shared_ptr<const NativeModule>>>();
  native_ = promise->get_future().share();
  std::thread([promise, compiler, wasm = wasm_, key = compiler->cache_key(wasm_),
               seconds = compile_seconds_]() {
    try {
      auto t0 = std::chrono::steady_clock::now();
      std::string so = compiler->compile(wasm, key);
      seconds->store(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      promise->set_value(std::shared_ptr<const NativeModule>(NativeModule::load(so)));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
}

Program::~Program() = default;

bool Program::native_ready() const {
  return native_.valid() && native_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::shared_ptr<const NativeModule> Program::native() {
  if (!native_.valid()) fail("program {}: native tier disabled", hash_.substr(0, 12));
  return native_.get();
}

std::shared_ptr<const GuestModule> Program::module_for_launch() {
  if (policy_ == TierPolicy::InterpreterOnly) return interp_;
  if (policy_ == TierPolicy::NativeOnly || !interp_) return native();
  if (native_ready()) {
    try {
      return native_.get();
    } catch (const Error&) {
      return interp_;  // e.g. the C compiler hit its limits: keep serving from the interpreter
    }
  }
  return interp_;
}

}  // namespace pith::runtime
