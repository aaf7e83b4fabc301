// Launchers of the element-wise activation kernels (activation_body.h): the gated FFN
// activations, the residual add of a DType row, F32 -> DType conversion, bias rows, scaling and
// soft-capping. 16-byte vectors when rows and pointers allow.
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"

namespace pith::cuda {
namespace {

template <uint32_t N, bool kGelu, class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    swiglu_kernel(const T* gate, const T* up, uint32_t n, uint32_t ff, uint32_t ld, T* out) {
  PITH_EACH_THREAD(t)
  kern::swiglu_body<N, kGelu>(blockIdx.x, gridDim.x, t, gate, up, n, ff, ld, out);
}

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    add_bias_kernel(T* x, const float* bias, uint32_t n, uint32_t d) {
  PITH_EACH_THREAD(t) kern::add_bias_body<N>(blockIdx.x, gridDim.x, t, x, bias, n, d);
}

template <uint32_t N>
__global__ void __launch_bounds__(kern::kActivationThreads)
    scale_kernel(float* x, size_t total, float s, float softcap) {
  PITH_EACH_THREAD(t) kern::scale_body<N>(blockIdx.x, gridDim.x, t, x, total, s, softcap);
}

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    add_rows_kernel(float* residual, const T* x, size_t total) {
  PITH_EACH_THREAD(t) kern::add_rows_body<N>(blockIdx.x, gridDim.x, t, residual, x, total);
}

template <uint32_t N, class T>
__global__ void __launch_bounds__(kern::kActivationThreads)
    convert_rows_kernel(const float* src, size_t total, T* dst) {
  PITH_EACH_THREAD(t) kern::convert_rows_body<N>(blockIdx.x, gridDim.x, t, src, total, dst);
}

uint32_t blocks_for(size_t steps) {
  return kern::elementwise_blocks(steps, kern::kActivationThreads);
}

template <bool kGelu, class T>
void swiglu_typed(const T* gate, const T* up, uint32_t n, uint32_t ff, uint32_t ld, T* out,
                  cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  size_t total = size_t{n} * ff;
  if (kern::vector_ok<V>(gate, ff, ld) && kern::vector_ok<V>(up, ff, ld) &&
      kern::vector_ok<V>(out, ff, ff))
    kern::launch(blocks_for(total / V), kern::kActivationThreads, stream,
                 PITH_KERNEL(swiglu_kernel<V, kGelu>))(gate, up, n, ff, ld, out);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(swiglu_kernel<1, kGelu>))(gate, up, n, ff, ld, out);
}

template <class T>
void gated_typed(const T* gate, const T* up, uint32_t n, uint32_t ff, uint32_t ld, T* out,
                 FfnActivation act, cudaStream_t stream) {
  if (act == FfnActivation::GeluTanh)
    swiglu_typed<true>(gate, up, n, ff, ld, out, stream);
  else
    swiglu_typed<false>(gate, up, n, ff, ld, out, stream);
}

template <class T>
void add_bias_typed(T* x, const float* bias, uint32_t n, uint32_t d, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  size_t total = size_t{n} * d;
  if (kern::vector_ok<V>(x, d, d) && kern::vector_ok<V>(bias, d, d))
    kern::launch(blocks_for(total / V), kern::kActivationThreads, stream,
                 PITH_KERNEL(add_bias_kernel<V>))(x, bias, n, d);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(add_bias_kernel<1>))(x, bias, n, d);
}

void scale_launch(float* x, size_t total, float s, float softcap, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<float>;
  if (kern::vector_ok<V>(x, total, total))
    kern::launch(blocks_for(total / V), kern::kActivationThreads, stream,
                 PITH_KERNEL(scale_kernel<V>))(x, total, s, softcap);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream, PITH_KERNEL(scale_kernel<1>))(
        x, total, s, softcap);
}

template <class T>
void add_rows_typed(float* residual, const T* x, size_t total, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  if (kern::vector_ok<V>(x, total, total) && kern::vector_ok<V>(residual, total, total))
    kern::launch(blocks_for(total / V), kern::kActivationThreads, stream,
                 PITH_KERNEL(add_rows_kernel<V>))(residual, x, total);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(add_rows_kernel<1>))(residual, x, total);
}

template <class T>
void convert_rows_typed(const float* src, size_t total, T* dst, cudaStream_t stream) {
  constexpr uint32_t V = kern::kVec<T>;
  if (kern::vector_ok<V>(src, total, total) && kern::vector_ok<V>(dst, total, total))
    kern::launch(blocks_for(total / V), kern::kActivationThreads, stream,
                 PITH_KERNEL(convert_rows_kernel<V>))(src, total, dst);
  else
    kern::launch(blocks_for(total), kern::kActivationThreads, stream,
                 PITH_KERNEL(convert_rows_kernel<1>))(src, total, dst);
}

}  // namespace

void gated_activation(const void* gate, const void* up, uint32_t n, uint32_t ff, uint32_t ld,
                      void* out, DType type, FfnActivation act, cudaStream_t stream) {
  if (n == 0 || ff == 0) return;
  require(ld >= ff, "gated_activation", "leading dimension smaller than the row");
  if (type == DType::F32)
    gated_typed(static_cast<const float*>(gate), static_cast<const float*>(up), n, ff, ld,
                static_cast<float*>(out), act, stream);
  else
    gated_typed(static_cast<const kern::Bf16*>(gate), static_cast<const kern::Bf16*>(up), n, ff, ld,
                static_cast<kern::Bf16*>(out), act, stream);
  check_launch("gated_activation");
}

void add_bias(void* x, DType type, const float* bias, uint32_t n, uint32_t d, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  if (type == DType::F32)
    add_bias_typed(static_cast<float*>(x), bias, n, d, stream);
  else
    add_bias_typed(static_cast<kern::Bf16*>(x), bias, n, d, stream);
  check_launch("add_bias");
}

void scale_rows(float* x, size_t total, float s, cudaStream_t stream) {
  if (total == 0) return;
  scale_launch(x, total, s, 0, stream);
  check_launch("scale_rows");
}

void soft_cap(float* x, size_t total, float softcap, cudaStream_t stream) {
  if (total == 0) return;
  require(softcap > 0, "soft_cap", "the cap must be positive");
  scale_launch(x, total, 1, softcap, stream);
  check_launch("soft_cap");
}

void add_rows(float* residual, const void* x, DType type, uint32_t n, uint32_t d,
              cudaStream_t stream) {
  size_t total = size_t{n} * d;
  if (total == 0) return;
  if (type == DType::F32)
    add_rows_typed(residual, static_cast<const float*>(x), total, stream);
  else
    add_rows_typed(residual, static_cast<const kern::Bf16*>(x), total, stream);
  check_launch("add_rows");
}

void convert_rows(const float* src, uint32_t n, uint32_t d, void* dst, DType type,
                  cudaStream_t stream) {
  size_t total = size_t{n} * d;
  if (total == 0) return;
  if (type == DType::F32)
    convert_rows_typed(src, total, static_cast<float*>(dst), stream);
  else
    convert_rows_typed(src, total, static_cast<kern::Bf16*>(dst), stream);
  check_launch("convert_rows");
}

}  // namespace pith::cuda
