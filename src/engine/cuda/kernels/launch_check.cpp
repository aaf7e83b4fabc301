#include "engine/cuda/kernels/launch_check.h"

#include <cuda_runtime_api.h>

#include "common/error.h"

namespace pith::cuda {

void require(bool ok, const char* kernel, const char* message) {
  if (!ok) fail("CUDA kernel {}: {}", kernel, message);
}

void check_launch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    fail("CUDA kernel {}: launch failed: {}", kernel, cudaGetErrorString(err));
}

}  // namespace pith::cuda
