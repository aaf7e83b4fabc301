// CUDA host simulation: what nvcc gives a .cu file implicitly, for the host compiler. The
// simulation targets force-include this header into the backend's .cu files (compiled as C++).
// A __global__ function becomes a host function run once per block (sim/launch.h); shared
// memory is static per host thread, which holds because blocks run one after another.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/sim/launch.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
inline void __syncthreads() {}
