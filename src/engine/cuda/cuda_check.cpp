// Error reports of failed CUDA runtime / cuBLASLt calls. See cuda_check.h.
#include "engine/cuda/cuda_check.h"

#include <fmt/format.h>

#include <stdexcept>

namespace pith::cuda {

void cuda_call_failed(cudaError_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(fmt::format("CUDA error {} ({}) in {} at {}:{}",
                                       cudaGetErrorName(status), cudaGetErrorString(status), call,
                                       file, line));
}

void cublas_call_failed(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(fmt::format("cuBLASLt error {} ({}) in {} at {}:{}",
                                       cublasLtGetStatusName(status),
                                       cublasLtGetStatusString(status), call, file, line));
}

}  // namespace pith::cuda
