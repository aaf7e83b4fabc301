// CUDA host simulation (engine/cuda/sim): the profiler control calls. No profiler attaches to
// the simulation, so they only succeed, as they do on a GPU with none attached.
#pragma once

#include "cuda_runtime_api.h"

inline cudaError_t cudaProfilerStart() {
  return cudaSuccess;
}
inline cudaError_t cudaProfilerStop() {
  return cudaSuccess;
}
