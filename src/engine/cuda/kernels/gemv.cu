// Launcher of the skinny BF16 GEMM (gemv_body.h): Gemm (gemm.h) runs it instead of cuBLASLt for
// the shapes where it measured faster.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/gemv_body.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class Out>
__global__ void __launch_bounds__(kern::kGemvThreads)
    gemv_kernel(const kern::Bf16* w, uint32_t rows, uint32_t cols, const kern::Bf16* x, Out* y,
                size_t ldy) {
  __shared__ kern::GemvShared sh;
  kern::gemv_block<N>(kern::DeviceBlock::current(), sh, w, rows, cols, x, y, ldy);
}

template <uint32_t N, class Out>
void launch(const void* w, uint32_t rows, uint32_t cols, const void* x, void* y, size_t ldy,
            cudaStream_t stream) {
  const uint32_t blocks = kern::ceil_div(rows, kern::kGemvRowsPerBlock);
  gemv_kernel<N, Out><<<blocks, kern::kGemvThreads, 0, stream>>>(
      static_cast<const kern::Bf16*>(w), rows, cols, static_cast<const kern::Bf16*>(x),
      static_cast<Out*>(y), ldy);
}

template <class Out>
void launch_n(uint32_t n, const void* w, uint32_t rows, uint32_t cols, const void* x, void* y,
              size_t ldy, cudaStream_t stream) {
  switch (n) {
    case 1:
      return launch<1, Out>(w, rows, cols, x, y, ldy, stream);
    case 2:
      return launch<2, Out>(w, rows, cols, x, y, ldy, stream);
    case 3:
      return launch<3, Out>(w, rows, cols, x, y, ldy, stream);
    case 4:
      return launch<4, Out>(w, rows, cols, x, y, ldy, stream);
    case 5:
      return launch<5, Out>(w, rows, cols, x, y, ldy, stream);
    case 6:
      return launch<6, Out>(w, rows, cols, x, y, ldy, stream);
    case 7:
      return launch<7, Out>(w, rows, cols, x, y, ldy, stream);
    default:
      return launch<8, Out>(w, rows, cols, x, y, ldy, stream);
  }
}

}  // namespace

bool gemv_bf16_fits(uint32_t n, uint32_t cols, const void* w, const void* x) {
  return kern::gemv_fits(n, cols, w, x);
}

void gemv_bf16(const void* w, uint32_t rows, uint32_t cols, const void* x, uint32_t n, void* y,
               DType y_type, size_t ldy, cudaStream_t stream) {
  require(kern::gemv_fits(n, cols, w, x), "gemv_bf16", "shape or alignment unsupported");
  require(ldy >= rows, "gemv_bf16", "output rows overlap");
  require(rows <= 0xffffffffu - kern::kGemvRowsPerBlock, "gemv_bf16", "too many rows");
  if (rows == 0) return;
  if (y_type == DType::F32)
    launch_n<float>(n, w, rows, cols, x, y, ldy, stream);
  else
    launch_n<kern::Bf16>(n, w, rows, cols, x, y, ldy, stream);
  check_launch("gemv_bf16");
}

}  // namespace pith::cuda
