// Launchers of the row-moving kernels (rows_body.h): embedding, gather, scatter. 16-byte
// vectors when rows and pointers allow.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/rows_body.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kRowThreads)
    embed_rows_kernel(const T* table, const int32_t* tokens, uint32_t n, uint32_t d, float* out) {
  PITH_EACH_THREAD(t) kern::embed_rows_body<N>(blockIdx.x, gridDim.x, t, table, tokens, n, d, out);
}

template <uint32_t N>
__global__ void __launch_bounds__(kern::kRowThreads)
    gather_rows_kernel(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  PITH_EACH_THREAD(t) kern::gather_rows_body<N>(blockIdx.x, gridDim.x, t, src, idx, n, d, dst);
}

template <uint32_t N>
__global__ void __launch_bounds__(kern::kRowThreads)
    scatter_rows_kernel(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst) {
  PITH_EACH_THREAD(t) kern::scatter_rows_body<N>(blockIdx.x, gridDim.x, t, src, idx, n, d, dst);
}

uint32_t blocks_for(size_t steps) {
  return kern::elementwise_blocks(steps, kern::kRowThreads);
}

template <class T>
void embed_typed(const T* table, const int32_t* tokens, uint32_t n, uint32_t d, float* out,
                 cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  size_t total = size_t{n} * d;
  if (kern::vector_ok<V>(table, d, d) && kern::vector_ok<V>(out, d, d))
    kern::launch(blocks_for(total / V), kern::kRowThreads, stream,
                 PITH_KERNEL(embed_rows_kernel<V>))(table, tokens, n, d, out);
  else
    kern::launch(blocks_for(total), kern::kRowThreads, stream, PITH_KERNEL(embed_rows_kernel<1>))(
        table, tokens, n, d, out);
}

constexpr uint32_t kF32Vec = kern::kVec<float>;

bool rows_vector_ok(const float* a, const float* b, uint32_t d) {
  return kern::vector_ok<kF32Vec>(a, d, d) && kern::vector_ok<kF32Vec>(b, d, d);
}

}  // namespace

void embed_rows(const void* table, DType table_type, const int32_t* tokens, uint32_t n, uint32_t d,
                float* out, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  if (table_type == DType::F32)
    embed_typed(static_cast<const float*>(table), tokens, n, d, out, stream);
  else
    embed_typed(static_cast<const kern::Bf16*>(table), tokens, n, d, out, stream);
  check_launch("embed_rows");
}

void gather_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                 cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  size_t total = size_t{n} * d;
  if (rows_vector_ok(src, dst, d))
    kern::launch(blocks_for(total / kF32Vec), kern::kRowThreads, stream,
                 PITH_KERNEL(gather_rows_kernel<kF32Vec>))(src, idx, n, d, dst);
  else
    kern::launch(blocks_for(total), kern::kRowThreads, stream, PITH_KERNEL(gather_rows_kernel<1>))(
        src, idx, n, d, dst);
  check_launch("gather_rows");
}

void scatter_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                  cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  size_t total = size_t{n} * d;
  if (rows_vector_ok(src, dst, d))
    kern::launch(blocks_for(total / kF32Vec), kern::kRowThreads, stream,
                 PITH_KERNEL(scatter_rows_kernel<kF32Vec>))(src, idx, n, d, dst);
  else
    kern::launch(blocks_for(total), kern::kRowThreads, stream, PITH_KERNEL(scatter_rows_kernel<1>))(
        src, idx, n, d, dst);
  check_launch("scatter_rows");
}

}  // namespace pith::cuda
