// Launchers of the fused residual add + RMSNorm and the in-place row RMSNorm (norm_body.h): one
// block per row.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/norm_body.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kNormThreads)
    add_rmsnorm_kernel(float* residual, const float* delta, const float* weight, uint32_t d,
                       float eps, T* out) {
  PITH_SHARED(kern::NormShared, sh);
  kern::add_rmsnorm_body<N>(kern::DeviceBlock::current(), sh, residual, delta, weight, d, eps, out);
}

template <class T>
void add_rmsnorm_typed(float* residual, const float* delta, const float* weight, uint32_t n,
                       uint32_t d, float eps, T* out, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<float>;
  bool vec = kern::vector_ok<V>(residual, d, d) && kern::vector_ok<V>(weight, d, d) &&
             kern::vector_ok<V>(out, d, d) && (!delta || kern::vector_ok<V>(delta, d, d));
  if (vec)
    kern::launch(n, kern::kNormThreads, stream, PITH_KERNEL(add_rmsnorm_kernel<V>))(
        residual, delta, weight, d, eps, out);
  else
    kern::launch(n, kern::kNormThreads, stream, PITH_KERNEL(add_rmsnorm_kernel<1>))(
        residual, delta, weight, d, eps, out);
}

template <class T>
__global__ void __launch_bounds__(kern::kHeadNormThreads)
    rmsnorm_rows_kernel(T* x, const float* weight, uint32_t d, float eps) {
  PITH_SHARED(kern::NormShared, sh);
  kern::rmsnorm_rows_body(kern::DeviceBlock::current(), sh, x, weight, d, eps);
}

}  // namespace

void rmsnorm_rows(void* x, DType type, uint32_t n, uint32_t d, const float* weight, float eps,
                  cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  require(n <= 0x7fffffffu, "rmsnorm_rows", "too many rows");
  if (type == DType::F32)
    kern::launch(n, kern::kHeadNormThreads, stream, PITH_KERNEL(rmsnorm_rows_kernel))(
        static_cast<float*>(x), weight, d, eps);
  else
    kern::launch(n, kern::kHeadNormThreads, stream, PITH_KERNEL(rmsnorm_rows_kernel))(
        static_cast<kern::Bf16*>(x), weight, d, eps);
  check_launch("rmsnorm_rows");
}

void add_rmsnorm(float* residual, const float* delta, const float* weight, uint32_t n, uint32_t d,
                 float eps, void* out, DType out_type, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  require(n <= 0x7fffffffu, "add_rmsnorm", "too many rows");
  if (out_type == DType::F32)
    add_rmsnorm_typed(residual, delta, weight, n, d, eps, static_cast<float*>(out), stream);
  else
    add_rmsnorm_typed(residual, delta, weight, n, d, eps, static_cast<kern::Bf16*>(out), stream);
  check_launch("add_rmsnorm");
}

}  // namespace pith::cuda
