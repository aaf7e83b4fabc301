// The own paged-attention kernel: the __global__ wrapper around attention_block.
#include <string>

#include "engine/cuda/attention/attention_error.h"
#include "engine/cuda/attention/own_attention.h"
#include "engine/cuda/kernels/launch.h"

namespace pith::cuda {

namespace {

template <class T, uint32_t D>
__global__ void __launch_bounds__(attn::kThreads) own_attention_kernel(attn::KernelParams p) {
  PITH_SHARED(attn::SharedTile<D>, tile);
  kern::ThreadStates<attn::ThreadState<D>> states;
  auto* mine = &states;
  attn::attention_block<T, D>(
      p, blockIdx.x, blockIdx.y, blockIdx.z, tile,
      [&](auto&& phase) {
        PITH_EACH_THREAD(t) phase(t);
        __syncthreads();
      },
      [mine](uint32_t t) -> attn::ThreadState<D>& { return (*mine)(t); });
}

// Split-K's second launch: block (row task, head).
template <class T>
__global__ void __launch_bounds__(attn::kThreads) merge_splits_kernel(attn::KernelParams p) {
  PITH_EACH_THREAD(t) attn::merge_splits<T>(p, blockIdx.x, blockIdx.y, t);
}

template <class T>
void launch_typed(const attn::KernelParams& params, uint32_t n_rows, cudaStream_t stream) {
  const dim3 grid(n_rows, params.n_heads / params.heads_per_block, params.n_splits);
  if (attn::dims_per_thread(params.head_dim) == 2)
    kern::launch(grid, attn::kThreads, stream, PITH_KERNEL(own_attention_kernel<T, 2>))(params);
  else
    kern::launch(grid, attn::kThreads, stream, PITH_KERNEL(own_attention_kernel<T, 4>))(params);
  if (params.n_splits > 1)
    kern::launch(dim3(n_rows, params.n_heads), attn::kThreads, stream,
                 PITH_KERNEL(merge_splits_kernel<T>))(params);
}

}  // namespace

void launch_own_attention(const attn::KernelParams& params, uint32_t n_rows, DType dtype,
                          cudaStream_t stream) {
  if (n_rows == 0) return;
  if (params.n_splits == 0 || params.n_splits > attn::kMaxSplits ||
      (params.n_splits > 1 && (params.split_acc == nullptr || params.split_ml == nullptr)))
    throw_attention_error("paged attention: " + std::to_string(params.n_splits) +
                          " KV splits without their scratch");
  if (dtype == DType::F32)
    launch_typed<float>(params, n_rows, stream);
  else
    launch_typed<attn::Bf16>(params, n_rows, stream);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw_attention_error(std::string("paged attention launch: ") + cudaGetErrorString(status));
}

}  // namespace pith::cuda
