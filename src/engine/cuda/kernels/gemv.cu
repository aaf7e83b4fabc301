// Launcher of the skinny BF16 GEMM (gemv_body.h): Gemm (gemm.h) runs it instead of cuBLASLt for
// the shapes where it measured faster.
#include <type_traits>

#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/gemv_body.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <uint32_t N, class Out>
__global__ void __launch_bounds__(kern::kGemvThreads)
    gemv_kernel(const kern::Bf16* w, uint32_t rows, uint32_t cols, const kern::Bf16* x, Out* y,
                size_t ldy) {
  PITH_SHARED(kern::GemvShared, sh);
  kern::gemv_block<N>(kern::DeviceBlock::current(), sh, w, rows, cols, x, y, ldy);
}

template <uint32_t N, class Out>
void launch(const void* w, uint32_t rows, uint32_t cols, const void* x, void* y, size_t ldy,
            cudaStream_t stream) {
  const uint32_t blocks = kern::ceil_div(rows, kern::kGemvRowsPerBlock);
  kern::launch(blocks, kern::kGemvThreads, stream, PITH_KERNEL(gemv_kernel<N, Out>))(
      static_cast<const kern::Bf16*>(w), rows, cols, static_cast<const kern::Bf16*>(x),
      static_cast<Out*>(y), ldy);
}

template <uint32_t N, bool kGelu, class Out>
__global__ void __launch_bounds__(kern::kGemvThreads)
    gemv_gated_kernel(const kern::Bf16* w, uint32_t ff, uint32_t cols, const kern::Bf16* x,
                      Out* out) {
  PITH_SHARED(kern::GemvGatedShared, sh);
  kern::gemv_gated_block<N, kGelu>(kern::DeviceBlock::current(), sh, w, ff, cols, x, out);
}

template <uint32_t N, class Out>
void launch_gated(const void* w, uint32_t ff, uint32_t cols, const void* x, void* out, bool gelu,
                  cudaStream_t stream) {
  const uint32_t blocks = kern::ceil_div(ff, kern::kGemvRowsPerBlock);
  const auto* wb = static_cast<const kern::Bf16*>(w);
  const auto* xb = static_cast<const kern::Bf16*>(x);
  if (gelu)
    kern::launch(blocks, kern::kGemvThreads, stream, PITH_KERNEL(gemv_gated_kernel<N, true, Out>))(
        wb, ff, cols, xb, static_cast<Out*>(out));
  else
    kern::launch(blocks, kern::kGemvThreads, stream, PITH_KERNEL(gemv_gated_kernel<N, false, Out>))(
        wb, ff, cols, xb, static_cast<Out*>(out));
}

// f(std::integral_constant<uint32_t, n>{}) for n in [1, kGemvMaxN]: the kernels are
// instantiated per activation-row count.
template <class F>
void with_rows(uint32_t n, F&& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<uint32_t, 1>{});
    case 2:
      return f(std::integral_constant<uint32_t, 2>{});
    case 3:
      return f(std::integral_constant<uint32_t, 3>{});
    case 4:
      return f(std::integral_constant<uint32_t, 4>{});
    case 5:
      return f(std::integral_constant<uint32_t, 5>{});
    case 6:
      return f(std::integral_constant<uint32_t, 6>{});
    case 7:
      return f(std::integral_constant<uint32_t, 7>{});
    default:
      return f(std::integral_constant<uint32_t, 8>{});
  }
}
static_assert(kern::kGemvMaxN == 8, "with_rows covers 1..8");

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
  with_rows(n, [&](auto N) {
    if (y_type == DType::F32)
      launch<N(), float>(w, rows, cols, x, y, ldy, stream);
    else
      launch<N(), kern::Bf16>(w, rows, cols, x, y, ldy, stream);
  });
  check_launch("gemv_bf16");
}

void gemv_gated_bf16(const void* w, uint32_t ff, uint32_t cols, const void* x, uint32_t n,
                     void* out, DType out_type, FfnActivation act, cudaStream_t stream) {
  require(kern::gemv_fits(n, cols, w, x), "gemv_gated_bf16", "shape or alignment unsupported");
  require(ff <= 0xffffffffu - kern::kGemvRowsPerBlock, "gemv_gated_bf16", "too many rows");
  if (ff == 0) return;
  const bool gelu = act == FfnActivation::GeluTanh;
  with_rows(n, [&](auto N) {
    if (out_type == DType::F32)
      launch_gated<N(), float>(w, ff, cols, x, out, gelu, stream);
    else
      launch_gated<N(), kern::Bf16>(w, ff, cols, x, out, gelu, stream);
  });
  check_launch("gemv_gated_bf16");
}

}  // namespace pith::cuda
