// build_inferlet: compiles inferlet sources to a .wasm module with Debian's clang++-14 for
// wasm32-wasi and the pith SDK (used by `pith inferlet build`). The flags are the ones
// cmake/PithInferlet.cmake uses for the project's own inferlets: -O2, C++20, no exceptions, no
// SIMD (wasm2c 1.0.32 rejects it), the shadow stack first in memory so that overflowing it traps.
// C sources (files ending in .c, e.g. an embedded JavaScript engine) are compiled as C11 into
// objects of their own, with c_flags and without warnings (third-party code), then linked in.
#pragma once

#include <string>
#include <vector>

namespace pith::runtime {

struct InferletBuildOptions {
  std::vector<std::string> sources;  // C++ sources, and .c files compiled as C
  std::string output;
  std::string compiler;                   // "" = clang++-14, else clang++
  std::vector<std::string> extra_flags;   // C++ flags, e.g. -DNAME=1
  std::vector<std::string> include_dirs;  // -isystem for the C++ sources, -I for the C ones
  std::vector<std::string> c_flags;       // for the C sources only, e.g. -include prelude.h
};

// The commands that would run, in order: one per C source (its object in `workdir`), then the
// C++ compile and link (for messages and tests).
std::vector<std::vector<std::string>> inferlet_build_commands(const InferletBuildOptions& options,
                                                              const std::string& workdir);

// Runs them; throws pith::Error with the compiler's output on failure.
void build_inferlet(const InferletBuildOptions& options);

}  // namespace pith::runtime
