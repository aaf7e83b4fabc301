// Program: an uploaded inferlet module. Loading validates nothing by itself; it hashes the bytes
// and starts the native build (NativeCompiler) in the background at once, so the compile cost is
// paid at upload, never by a launch that finds the object already cached. native() returns the
// loaded module, waiting for the build if it is still running, and rethrows a build error.
#pragma once

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <string>

namespace pith::runtime {

class NativeModule;
class NativeCompiler;

class Program {
 public:
  // Starts the native build on a background thread unless the object is cached already.
  Program(std::string wasm, const NativeCompiler& compiler);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const std::string& hash() const { return hash_; }  // SHA-256 of the module bytes
  const std::string& wasm() const { return wasm_; }
  size_t size() const { return wasm_.size(); }

  bool native_ready() const;  // built (or failed) without waiting
  std::shared_ptr<const NativeModule> native();  // waits; throws pith::Error on build failure
  double compile_seconds() const { return compile_seconds_; }  // 0 if it came from the cache

 private:
  std::string wasm_;
  std::string hash_;
  std::shared_future<std::shared_ptr<const NativeModule>> native_;
  double compile_seconds_ = 0;
};

}  // namespace pith::runtime
