// Program: an uploaded inferlet module and its execution tiers. Loading hashes the bytes and,
// unless the native object is already in the cache, (1) parses and validates the module for the
// interpreter tier (milliseconds; a bad module fails here, at upload) and (2) starts the native
// build (NativeCompiler) on a background thread. Each launch takes the best tier ready at that
// moment: native once built, the interpreter before. Launches never wait for the C compiler
// unless the policy is native-only.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>

namespace pith::runtime {

class GuestModule;
class NativeModule;
class InterpModule;
class NativeCompiler;

enum class TierPolicy {
  Auto,             // interpreter until the native object is ready, then native
  NativeOnly,       // launches wait for the native build
  InterpreterOnly,  // never build native code (tests, debugging)
};

class Program {
 public:
  // The compiler is shared: a background build may outlive the Runtime that started it.
  Program(std::string wasm, std::shared_ptr<const NativeCompiler> compiler, TierPolicy policy);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const std::string& hash() const { return hash_; }  // SHA-256 of the module bytes
  size_t size() const { return wasm_.size(); }
  TierPolicy policy() const { return policy_; }

  // The module a launch should use now (see class comment). Throws pith::Error if no tier can
  // run it (e.g. native-only and the build failed).
  std::shared_ptr<const GuestModule> module_for_launch();

  bool native_ready() const;  // native build finished (successfully or not)
  bool native_building() const { return native_.valid() && !native_ready(); }
  std::shared_ptr<const NativeModule> native();  // waits; throws pith::Error on build failure
  double compile_seconds() const {
    return compile_seconds_->load();
  }  // 0 if it came from the cache

 private:
  std::string wasm_;
  std::string hash_;
  TierPolicy policy_;
  std::shared_ptr<const InterpModule> interp_;  // parsed when native code was not cached
  std::shared_future<std::shared_ptr<const NativeModule>> native_;
  std::shared_ptr<std::atomic<double>> compile_seconds_ =
      std::make_shared<std::atomic<double>>(0.0);
};

}  // namespace pith::runtime
