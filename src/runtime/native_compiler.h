// NativeCompiler: the native tier's build step. A module is translated to C with wasm2c
// (wabt 1.0.32), a small shim with stable entry points is added, and the system C compiler
// builds a shared object, each tool in a separate CPU-time / memory limited process. Results
// are cached on disk under SHA-256(module bytes, toolchain versions, flags, host import table),
// so a module is compiled once per toolchain, at upload, and later launches just dlopen it.
//
// Measured on Debian 12 (gcc 12 -O2): 0.4 s for a 13 KB module, 2.5-7.6 s for 200 KB; run it in
// the background (Program does) and serve first launches from another tier meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/subprocess.h"

namespace pith::runtime {

struct NativeCompilerConfig {
  std::string cache_dir;  // created if missing
  std::string wasm2c = "wasm2c";
  std::string cc = "cc";
  std::string opt_level = "-O2";
  // Per tool invocation. A module with an embedded interpreter (agent_codeact: 707 KB of Wasm,
  // 8.3 MB of C) takes 42 CPU-seconds of gcc -O2 on an idle 2-core Xeon, and went past 60 beside
  // another build (SMT siblings share a core, so CPU time grows with contention).
  ProcessLimits limits = {.cpu_seconds = 300, .wall_seconds = 600};
};

class NativeCompiler {
 public:
  explicit NativeCompiler(NativeCompilerConfig config);

  // Path of the cached shared object for these module bytes, or "" if not built yet.
  std::string cached(std::string_view wasm) const;

  // Builds (or finds) the shared object for the module and returns its path. Throws pith::Error
  // naming the problem: unknown import, wrong import signature, tool failure or limit.
  std::string compile(std::string_view wasm) const;
  // The same with the module's cache_key computed by the caller: a background builder then never
  // calls into libcrypto, whose exit handlers may already have run when a process ends while
  // a build is still going.
  std::string compile(std::string_view wasm, const std::string& key) const;

  // Cache key of a module: hex SHA-256 over the module and everything that affects the output.
  std::string cache_key(std::string_view wasm) const;

  const NativeCompilerConfig& config() const { return config_; }

 private:
  // Removes build folders a killed process left in the cache (older than any build can run).
  void sweep_abandoned_builds() const;

  NativeCompilerConfig config_;
  std::string toolchain_id_;  // tool versions + flags + shim/import-table text
};

// Hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

// The C prototypes of every host import (from api/host_imports.h), as text for the shim.
std::string host_import_prototypes();

// True if `module`.`name` is a function the host provides.
bool is_host_import(std::string_view module, std::string_view name);

}  // namespace pith::runtime
