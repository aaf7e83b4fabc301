// build_inferlet: compiles C++ inferlet sources to a .wasm module with Debian's clang++-14 for
// wasm32-wasi and the pith SDK (used by `pith inferlet build`). The flags are the ones
// cmake/PithInferlet.cmake uses for the project's own inferlets: -O2, C++20, no exceptions, no
// SIMD (wasm2c 1.0.32 rejects it), the shadow stack first in memory so that overflowing it traps.
#pragma once

#include <string>
#include <vector>

namespace pith::runtime {

struct InferletBuildOptions {
  std::vector<std::string> sources;
  std::string output;
  std::string compiler;                 // "" = clang++-14, else clang++
  std::vector<std::string> extra_flags; // e.g. -DNAME=1
};

// The command line that would run (for messages and tests).
std::vector<std::string> inferlet_build_command(const InferletBuildOptions& options);

// Runs it; throws pith::Error with the compiler's output on failure.
void build_inferlet(const InferletBuildOptions& options);

}  // namespace pith::runtime
