// Launchers of the mixture-of-experts kernels (moe_body.h).
#include "engine/cuda/kernels.h"

#include <atomic>

#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/moe_body.h"
#include "engine/cuda/kernels/moe_mma_body.h"

namespace pith::cuda {
namespace {

std::atomic<bool> moe_tensor_cores{true};

uint32_t blocks_for(size_t steps) {
  return kern::elementwise_blocks(steps, kern::kActivationThreads);
}

__global__ void __launch_bounds__(kern::kMoeRouteThreads)
    route_kernel(float* logits, uint32_t E, uint32_t K, bool norm, const float* expert_scale,
                 uint32_t* experts, float* weights) {
  PITH_SHARED(kern::MoeRouteShared, sh);
  kern::moe_route_block(kern::DeviceBlock::current(), sh, logits, E, K, norm, expert_scale, experts,
                        weights);
}

__global__ void __launch_bounds__(kern::kMoeThreads)
    sort_kernel(const uint32_t* experts, uint32_t T, uint32_t E, uint32_t K, uint32_t* offsets,
                uint32_t* slot_token, uint32_t* slot_of) {
  PITH_SHARED(kern::MoeSortShared, sh);
  kern::moe_sort_body(kern::DeviceBlock::current(), sh, experts, T, E, K, offsets, slot_token,
                      slot_of);
}

template <class W, class X, class Out>
__global__ void __launch_bounds__(kern::kMoeThreads)
    expert_gemm_kernel(const W* w, uint32_t rows, uint32_t cols, const X* x, size_t ld_x,
                       const uint32_t* slot_token, bool gather, const uint32_t* offsets, Out* y,
                       size_t ld_y) {
  PITH_SHARED(kern::MoeGemmShared, sh);
  kern::moe_expert_gemm_block(blockIdx.x, blockIdx.y, w, rows, cols, x, ld_x, slot_token, gather,
                              offsets, y, ld_y, sh, [&](auto&& phase) {
                                PITH_EACH_THREAD(t) phase(t);
                                __syncthreads();
                              });
}

__global__ void __launch_bounds__(kern::kActivationThreads)
    combine_kernel(const float* y, const uint32_t* slot_of, const float* weights, uint32_t T,
                   uint32_t K, uint32_t d, float* out) {
  PITH_EACH_THREAD(t)
  kern::moe_combine_body(blockIdx.x, gridDim.x, t, y, slot_of, weights, T, K, d, out);
}

__global__ void __launch_bounds__(kern::kActivationThreads)
    add_gated_kernel(const float* ysh, const float* g, uint32_t T, uint32_t d, float* out) {
  PITH_EACH_THREAD(t) kern::moe_add_gated_body(blockIdx.x, gridDim.x, t, ysh, g, T, d, out);
}

template <class Out>
__global__ void __launch_bounds__(kern::kGemvThreads)
    expert_gemv_kernel(const kern::Bf16* w, uint32_t E, uint32_t rows, uint32_t cols,
                       const kern::Bf16* x, size_t ld_x, const uint32_t* slot_token, bool gather,
                       const uint32_t* offsets, Out* y, size_t ld_y) {
  PITH_SHARED(kern::GemvShared, sh);
  kern::moe_expert_gemv_block(kern::DeviceBlock::current(), sh, w, E, rows, cols, x, ld_x,
                              slot_token, gather, offsets, y, ld_y);
}

template <class Out>
__global__ void __launch_bounds__(kern::kMoeMmaThreads)
    expert_mma_kernel(const kern::Bf16* w, uint32_t rows, uint32_t cols, const kern::Bf16* x,
                      size_t ld_x, const uint32_t* slot_token, bool gather, const uint32_t* offsets,
                      Out* y, size_t ld_y, bool vec) {
  PITH_SHARED(kern::MoeMmaShared, sh);
  kern::moe_expert_mma_block(kern::DeviceBlock::current(), sh, w, rows, cols, x, ld_x, slot_token,
                             gather, offsets, y, ld_y, vec);
}

template <class Out>
void launch_mma(uint32_t E, const void* w, uint32_t rows, uint32_t cols, const void* x, size_t ld_x,
                const uint32_t* slot_token, bool gather, const uint32_t* offsets, void* y,
                size_t ld_y, cudaStream_t stream) {
  const dim3 grid(E, kern::ceil_div(rows, kern::kMoeMmaRows));
  require(grid.y <= 65535, "moe_expert_gemm", "too many rows");
  const auto* wb = static_cast<const kern::Bf16*>(w);
  const auto* xb = static_cast<const kern::Bf16*>(x);
  const bool vec = kern::vector_ok<kern::kMoeMmaVec>(wb, cols, cols) &&
                   kern::vector_ok<kern::kMoeMmaVec>(xb, cols, ld_x);
  kern::launch(grid, kern::kMoeMmaThreads, stream, PITH_KERNEL(expert_mma_kernel<Out>))(
      wb, rows, cols, xb, ld_x, slot_token, gather, offsets, static_cast<Out*>(y), ld_y, vec);
}

template <class Out>
void launch_gemv(uint32_t E, uint32_t n_slots, const void* w, uint32_t rows, uint32_t cols,
                 const void* x, size_t ld_x, const uint32_t* slot_token, bool gather,
                 const uint32_t* offsets, void* y, size_t ld_y, cudaStream_t stream) {
  const dim3 grid(kern::ceil_div(rows, kern::kGemvRowsPerBlock), n_slots);
  kern::launch(grid, kern::kGemvThreads, stream, PITH_KERNEL(expert_gemv_kernel<Out>))(
      static_cast<const kern::Bf16*>(w), E, rows, cols, static_cast<const kern::Bf16*>(x), ld_x,
      slot_token, gather, offsets, static_cast<Out*>(y), ld_y);
}

template <class W, class X, class Out>
void launch_gemm(dim3 grid, const void* w, uint32_t rows, uint32_t cols, const void* x, size_t ld_x,
                 const uint32_t* slot_token, bool gather, const uint32_t* offsets, void* y,
                 size_t ld_y, cudaStream_t stream) {
  kern::launch(grid, kern::kMoeThreads, stream, PITH_KERNEL(expert_gemm_kernel<W, X, Out>))(
      static_cast<const W*>(w), rows, cols, static_cast<const X*>(x), ld_x, slot_token, gather,
      offsets, static_cast<Out*>(y), ld_y);
}

}  // namespace

void moe_route(float* logits, uint32_t T, uint32_t E, uint32_t K, bool norm_top_k,
               const float* expert_scale, uint32_t* experts, float* weights, cudaStream_t stream) {
  require(K >= 1 && K <= kern::kMoeMaxUsed && K <= E, "moe_route", "unsupported experts per token");
  if (T == 0) return;
  kern::launch(T, kern::kMoeRouteThreads, stream, PITH_KERNEL(route_kernel))(
      logits, E, K, norm_top_k, expert_scale, experts, weights);
  check_launch("moe_route");
}

void moe_sort(const uint32_t* experts, uint32_t T, uint32_t E, uint32_t K, uint32_t* offsets,
              uint32_t* slot_token, uint32_t* slot_of, cudaStream_t stream) {
  if (T == 0) return;
  kern::launch(E, kern::kMoeThreads, stream, PITH_KERNEL(sort_kernel))(experts, T, E, K, offsets,
                                                                       slot_token, slot_of);
  check_launch("moe_sort");
}

void moe_expert_gemm(const void* w, DType w_type, uint32_t E, uint32_t rows, uint32_t cols,
                     const void* x, DType x_type, size_t ld_x, const uint32_t* slot_token,
                     bool gather, const uint32_t* offsets, void* y, DType y_type, size_t ld_y,
                     uint32_t n_tokens, uint32_t k_used, cudaStream_t stream) {
  require(w_type == x_type, "moe_expert_gemm", "weights and inputs of different types");
  require(E <= 0x7fffffffu, "moe_expert_gemm", "too many experts");
  // A token picks an expert once, so no expert has more slots than the step has tokens.
  if (w_type == DType::BF16 && n_tokens <= kern::kGemvMaxN && ld_x % kern::kGemvVec == 0 &&
      kern::gemv_fits(1, cols, w, x)) {
    const uint32_t n_slots = n_tokens * k_used;
    if (n_slots == 0) return;
    require(n_slots <= 65535, "moe_expert_gemm", "too many slots");
    if (y_type == DType::F32)
      launch_gemv<float>(E, n_slots, w, rows, cols, x, ld_x, slot_token, gather, offsets, y, ld_y,
                         stream);
    else
      launch_gemv<kern::Bf16>(E, n_slots, w, rows, cols, x, ld_x, slot_token, gather, offsets, y,
                              ld_y, stream);
    check_launch("moe_expert_gemm");
    return;
  }
  // BF16 beyond decode sizes (prefills): tensor cores. The CUDA-core tiles below stay for F32
  // weights (F32 mode runs without TF32) and as the checked reference of the tensor-core form.
  if (w_type == DType::BF16 && moe_tensor_cores) {
    if (y_type == DType::F32)
      launch_mma<float>(E, w, rows, cols, x, ld_x, slot_token, gather, offsets, y, ld_y, stream);
    else
      launch_mma<kern::Bf16>(E, w, rows, cols, x, ld_x, slot_token, gather, offsets, y, ld_y,
                             stream);
    check_launch("moe_expert_gemm");
    return;
  }
  const dim3 grid(E, (rows + kern::kMoeRows - 1) / kern::kMoeRows);
  require(grid.y <= 65535, "moe_expert_gemm", "too many rows");
  using kern::Bf16;
  if (w_type == DType::F32 && y_type == DType::F32)
    launch_gemm<float, float, float>(grid, w, rows, cols, x, ld_x, slot_token, gather, offsets, y,
                                     ld_y, stream);
  else if (w_type == DType::BF16 && y_type == DType::BF16)
    launch_gemm<Bf16, Bf16, Bf16>(grid, w, rows, cols, x, ld_x, slot_token, gather, offsets, y,
                                  ld_y, stream);
  else if (w_type == DType::BF16 && y_type == DType::F32)
    launch_gemm<Bf16, Bf16, float>(grid, w, rows, cols, x, ld_x, slot_token, gather, offsets, y,
                                   ld_y, stream);
  else
    require(false, "moe_expert_gemm", "unsupported type combination");
  check_launch("moe_expert_gemm");
}

void set_moe_tensor_cores(bool on) {
  moe_tensor_cores = on;
}

void moe_combine(const float* y, const uint32_t* slot_of, const float* weights, uint32_t T,
                 uint32_t K, uint32_t d, float* out, cudaStream_t stream) {
  const size_t total = size_t{T} * d;
  if (total == 0) return;
  kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(combine_kernel))(
      y, slot_of, weights, T, K, d, out);
  check_launch("moe_combine");
}

void moe_add_gated(const float* ysh, const float* g, uint32_t T, uint32_t d, float* out,
                   cudaStream_t stream) {
  const size_t total = size_t{T} * d;
  if (total == 0) return;
  kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(add_gated_kernel))(
      ysh, g, T, d, out);
  check_launch("moe_add_gated");
}

}  // namespace pith::cuda
