// Launcher of the RoPE kernel (rope_body.h).
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/rope_body.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kRopeThreads)
    rope_kernel(T* x, uint32_t n, uint32_t n_heads, uint32_t head_dim, uint32_t n_pairs,
                bool split_half, const float* cos_v, const float* sin_v) {
  PITH_EACH_THREAD(t)
  kern::rope_body(blockIdx.x, gridDim.x, t, x, n, n_heads, head_dim, n_pairs, split_half, cos_v,
                  sin_v);
}

}  // namespace

void rope(void* x, DType type, uint32_t n, uint32_t n_heads, uint32_t head_dim, uint32_t n_pairs,
          bool split_half, const float* cos, const float* sin, cudaStream_t stream) {
  require(2 * n_pairs <= head_dim, "rope", "more rotary pairs than the head has");
  size_t pairs = size_t{n} * n_heads * n_pairs;
  if (pairs == 0) return;
  uint32_t blocks = kern::elementwise_blocks(pairs, kern::kRopeThreads);
  if (type == DType::F32)
    kern::launch(blocks, kern::kRopeThreads, stream, PITH_KERNEL(rope_kernel))(
        static_cast<float*>(x), n, n_heads, head_dim, n_pairs, split_half, cos, sin);
  else
    kern::launch(blocks, kern::kRopeThreads, stream, PITH_KERNEL(rope_kernel))(
        static_cast<kern::Bf16*>(x), n, n_heads, head_dim, n_pairs, split_half, cos, sin);
  check_launch("rope");
}

}  // namespace pith::cuda
