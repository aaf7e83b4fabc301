// Tests that run inferlets from the build tree call ASSERT_TRUE(inferlet_built(path)) first.
// The project's one policy for inferlets that were not built: the test fails and says which file
// is missing and how to build it. It never skips: a build without the Wasm toolchain must not
// pass the suite with the runtime and model paths untested.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace pith {

inline ::testing::AssertionResult inferlet_built(const std::string& path) {
  if (std::filesystem::is_regular_file(path)) return ::testing::AssertionSuccess();
  const std::string name = std::filesystem::path(path).stem().string();
  return ::testing::AssertionFailure()
         << path << " is missing: build it with `cmake --build BUILD --target inferlet_" << name
         << "` (or `make build`); inferlets need clang-14, lld-14 and wasi-libc, which "
            "`make deps` installs";
}

}  // namespace pith
