// Where the benchmarks find the inferlets they launch: `dir` from --inferlets, or the build
// tree's inferlets/ folder (PITH_BUILD_INFERLET_DIR, set per benchmark source by CMake).
#pragma once

#include <filesystem>
#include <string>

#include "common/error.h"

namespace pith::bench {

inline std::string find_inferlet(const std::string& dir, const std::string& name) {
  std::string p = dir + "/" + name + ".wasm";
  if (!std::filesystem::exists(p))
    fail("{}: not found (build the inferlets, or pass --inferlets DIR)", p);
  return p;
}

}  // namespace pith::bench
