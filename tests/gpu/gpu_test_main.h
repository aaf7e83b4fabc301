// main() of the GPU test executables: without a CUDA device they print why and exit 77, which
// ctest reports as skipped (SKIP_RETURN_CODE 77), never as passed.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/cuda/cuda_backend.h"

#define PITH_GPU_TEST_MAIN()                                             \
  int main(int argc, char** argv) {                                      \
    if (::pith::cuda_device_count() == 0) {                              \
      const char* req = std::getenv("PITH_REQUIRE_GPU");                 \
      if (req && std::strcmp(req, "1") == 0) {                           \
        std::fprintf(stderr, "no CUDA device and PITH_REQUIRE_GPU=1\n"); \
        return 1;                                                        \
      }                                                                  \
      std::fprintf(stderr, "no CUDA device: GPU tests skipped\n");       \
      return 77;                                                         \
    }                                                                    \
    ::testing::InitGoogleTest(&argc, argv);                              \
    return RUN_ALL_TESTS();                                              \
  }
