// CUDA host simulation (engine/cuda/sim): see cuda_runtime_api.h.
#pragma once

#include "cuda_runtime_api.h"

// The runtime's C++ conveniences for typed pointers.
template <class T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
template <class T>
cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
