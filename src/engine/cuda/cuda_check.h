// Error checks around CUDA runtime and cuBLASLt calls. A failing call is a backend failure (a
// device fault, a driver problem, out of device memory mid-run), reported as std::runtime_error
// naming the call, its location and the runtime's message; bad input never gets this far.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace pith::cuda {

[[noreturn]] void cuda_call_failed(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void cublas_call_failed(cublasStatus_t status, const char* call, const char* file,
                                     int line);

}  // namespace pith::cuda

#define PITH_CUDA_CHECK(call)                                                  \
  do {                                                                         \
    cudaError_t pith_status_ = (call);                                         \
    if (pith_status_ != cudaSuccess)                                           \
      ::pith::cuda::cuda_call_failed(pith_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define PITH_CUBLAS_CHECK(call)                                                  \
  do {                                                                           \
    cublasStatus_t pith_status_ = (call);                                        \
    if (pith_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::pith::cuda::cublas_call_failed(pith_status_, #call, __FILE__, __LINE__); \
  } while (0)
