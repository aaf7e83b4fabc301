// main() of the GPU test executables: without a CUDA device they print why and exit 77, which
// ctest reports as skipped (SKIP_RETURN_CODE 77), never as passed. (Built against the host
// simulation they always find its one device.)
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/cuda/cuda_backend.h"

// A test that times the device: skipped on the host simulation (src/engine/cuda/sim), whose
// times are the CPU's.
#if PITH_CUDA_SIM
#define PITH_SKIP_TIMING_ON_SIM() GTEST_SKIP() << "times the device: not on the host simulation"
#else
#define PITH_SKIP_TIMING_ON_SIM() (void)0
#endif

// Whether the tests run on the host simulation, which runs every GPU thread in turn on the CPU:
// there sizes that only matter to a GPU's speed shrink to what still reaches the same paths.
#if PITH_CUDA_SIM
inline constexpr bool kOnHostSimulation = true;
#else
inline constexpr bool kOnHostSimulation = false;
#endif

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
