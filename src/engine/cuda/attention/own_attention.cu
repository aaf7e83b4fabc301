// The own paged-attention kernel: the __global__ wrapper around attention_block.
#include <string>

#include "engine/cuda/attention/attention_error.h"
#include "engine/cuda/attention/own_attention.h"

namespace pith::cuda {

namespace {

template <class T>
__global__ void __launch_bounds__(attn::kThreads) own_attention_kernel(attn::KernelParams p) {
  __shared__ attn::SharedTile tile;
  attn::ThreadState state;
  attn::ThreadState* mine = &state;
  attn::attention_block<T>(
      p, blockIdx.x, blockIdx.y, tile,
      [&](auto&& phase) {
        phase(threadIdx.x);
        __syncthreads();
      },
      [mine](uint32_t) -> attn::ThreadState& { return *mine; });
}

}  // namespace

void launch_own_attention(const attn::KernelParams& params, uint32_t n_rows, DType dtype,
                          cudaStream_t stream) {
  if (n_rows == 0) return;
  const dim3 grid(n_rows, params.n_heads / params.heads_per_block);
  if (dtype == DType::F32)
    own_attention_kernel<float><<<grid, attn::kThreads, 0, stream>>>(params);
  else
    own_attention_kernel<attn::Bf16><<<grid, attn::kThreads, 0, stream>>>(params);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw_attention_error(std::string("paged attention launch: ") + cudaGetErrorString(status));
}

}  // namespace pith::cuda
