// Launchers of the row-moving kernels (rows_body.h): embedding, gather, scatter.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/rows_body.h"

namespace pith::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(kern::kRowThreads)
    embed_rows_kernel(const T* table, const int32_t* tokens, uint32_t n, uint32_t d, float* out) {
  kern::embed_rows_body(blockIdx.x, gridDim.x, threadIdx.x, table, tokens, n, d, out);
}

__global__ void __launch_bounds__(kern::kRowThreads)
    gather_rows_kernel(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  kern::gather_rows_body(blockIdx.x, gridDim.x, threadIdx.x, src, idx, n, d, dst);
}

__global__ void __launch_bounds__(kern::kRowThreads)
    scatter_rows_kernel(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  kern::scatter_rows_body(blockIdx.x, gridDim.x, threadIdx.x, src, idx, n, d, dst);
}

uint32_t row_blocks(uint32_t n, uint32_t d) {
  return kern::elementwise_blocks(size_t{n} * d, kern::kRowThreads);
}

}  // namespace

void embed_rows(const void* table, DType table_type, const int32_t* tokens, uint32_t n, uint32_t d,
                float* out, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  uint32_t blocks = row_blocks(n, d);
  if (table_type == DType::F32)
    embed_rows_kernel<<<blocks, kern::kRowThreads, 0, stream>>>(static_cast<const float*>(table),
                                                                tokens, n, d, out);
  else
    embed_rows_kernel<<<blocks, kern::kRowThreads, 0, stream>>>(
        static_cast<const kern::Bf16*>(table), tokens, n, d, out);
  check_launch("embed_rows");
}

void gather_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                 cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  gather_rows_kernel<<<row_blocks(n, d), kern::kRowThreads, 0, stream>>>(src, idx, n, d, dst);
  check_launch("gather_rows");
}

void scatter_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                  cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  scatter_rows_kernel<<<row_blocks(n, d), kern::kRowThreads, 0, stream>>>(src, idx, n, d, dst);
  check_launch("scatter_rows");
}

}  // namespace pith::cuda
