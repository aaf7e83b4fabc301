// Launchers of the LoRA row kernels (lora_body.h).
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/lora_body.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kLoraThreads)
    lora_gather_kernel(const T* src, const uint32_t* idx, uint32_t n, uint32_t d, T* dst) {
  PITH_EACH_THREAD(t) kern::lora_gather_body(blockIdx.x, gridDim.x, t, src, idx, n, d, dst);
}

template <class T>
__global__ void __launch_bounds__(kern::kLoraThreads)
    lora_add_kernel(const float* v, const uint32_t* idx, uint32_t n, uint32_t d, float scale, T* y,
                    uint32_t ldy, uint32_t col0) {
  PITH_EACH_THREAD(t)
  kern::lora_add_body(blockIdx.x, gridDim.x, t, v, idx, n, d, scale, y, ldy, col0);
}

uint32_t blocks_for(size_t total) {
  return kern::elementwise_blocks(total, kern::kLoraThreads);
}

}  // namespace

void lora_gather_rows(const void* src, DType type, const uint32_t* idx, uint32_t n, uint32_t d,
                      void* dst, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  const uint32_t blocks = blocks_for(size_t{n} * d);
  if (type == DType::F32)
    kern::launch(blocks, kern::kLoraThreads, stream, PITH_KERNEL(lora_gather_kernel))(
        static_cast<const float*>(src), idx, n, d, static_cast<float*>(dst));
  else
    kern::launch(blocks, kern::kLoraThreads, stream, PITH_KERNEL(lora_gather_kernel))(
        static_cast<const kern::Bf16*>(src), idx, n, d, static_cast<kern::Bf16*>(dst));
  check_launch("lora_gather_rows");
}

void lora_add_rows(const float* v, const uint32_t* idx, uint32_t n, uint32_t d, float scale,
                   void* y, DType y_type, uint32_t ldy, uint32_t col0, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  const uint32_t blocks = blocks_for(size_t{n} * d);
  if (y_type == DType::F32)
    kern::launch(blocks, kern::kLoraThreads, stream, PITH_KERNEL(lora_add_kernel))(
        v, idx, n, d, scale, static_cast<float*>(y), ldy, col0);
  else
    kern::launch(blocks, kern::kLoraThreads, stream, PITH_KERNEL(lora_add_kernel))(
        v, idx, n, d, scale, static_cast<kern::Bf16*>(y), ldy, col0);
  check_launch("lora_add_rows");
}

}  // namespace pith::cuda
