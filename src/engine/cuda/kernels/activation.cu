// Launchers of the element-wise activation kernels (activation_body.h): SwiGLU, the residual
// add of a DType row, F32 -> DType conversion.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    swiglu_kernel(const T* gate, const T* up, uint32_t n, uint32_t ff, uint32_t ld, T* out) {
  kern::swiglu_body(blockIdx.x, gridDim.x, threadIdx.x, gate, up, n, ff, ld, out);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    add_rows_kernel(float* residual, const T* x, size_t total) {
  kern::add_rows_body(blockIdx.x, gridDim.x, threadIdx.x, residual, x, total);
}

template <class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    convert_rows_kernel(const float* src, size_t total, T* dst) {
  kern::convert_rows_body(blockIdx.x, gridDim.x, threadIdx.x, src, total, dst);
}

uint32_t blocks_for(size_t total) {
  return kern::elementwise_blocks(total, kern::kActivationThreads);
}

}  // namespace

void swiglu(const void* gate, const void* up, uint32_t n, uint32_t ff, uint32_t ld, void* out,
            DType type, cudaStream_t stream) {
  if (n == 0 || ff == 0) return;
  require(ld >= ff, "swiglu", "leading dimension smaller than the row");
  uint32_t blocks = blocks_for(size_t{n} * ff);
  if (type == DType::F32)
    swiglu_kernel<<<blocks, kern::kActivationThreads, 0, stream>>>(
        static_cast<const float*>(gate), static_cast<const float*>(up), n, ff, ld,
        static_cast<float*>(out));
  else
    swiglu_kernel<<<blocks, kern::kActivationThreads, 0, stream>>>(
        static_cast<const kern::Bf16*>(gate), static_cast<const kern::Bf16*>(up), n, ff, ld,
        static_cast<kern::Bf16*>(out));
  check_launch("swiglu");
}

void add_rows(float* residual, const void* x, DType type, uint32_t n, uint32_t d,
              cudaStream_t stream) {
  size_t total = size_t{n} * d;
  if (total == 0) return;
  if (type == DType::F32)
    add_rows_kernel<<<blocks_for(total), kern::kActivationThreads, 0, stream>>>(
        residual, static_cast<const float*>(x), total);
  else
    add_rows_kernel<<<blocks_for(total), kern::kActivationThreads, 0, stream>>>(
        residual, static_cast<const kern::Bf16*>(x), total);
  check_launch("add_rows");
}

void convert_rows(const float* src, uint32_t n, uint32_t d, void* dst, DType type,
                  cudaStream_t stream) {
  size_t total = size_t{n} * d;
  if (total == 0) return;
  if (type == DType::F32)
    convert_rows_kernel<<<blocks_for(total), kern::kActivationThreads, 0, stream>>>(
        src, total, static_cast<float*>(dst));
  else
    convert_rows_kernel<<<blocks_for(total), kern::kActivationThreads, 0, stream>>>(
        src, total, static_cast<kern::Bf16*>(dst));
  check_launch("convert_rows");
}

}  // namespace pith::cuda
