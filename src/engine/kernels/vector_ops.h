// Vectorised element-wise and reduction helpers of the forward pass (everything but matmul):
// RMS norm, SwiGLU, softmax, dot, axpy, residual add, scale, and f16/bf16 row conversion.
//
// All work on contiguous f32 arrays of length n (any n, no alignment needed). Each call picks
// the best kernel ISA of this CPU (cpu_features.h) unless one is passed explicitly (tests force
// the scalar and SIMD paths to compare them). Results agree with the scalar path to f32
// rounding (reductions sum in a different order; exp is a polynomial accurate to ~2 ulp).
//
// Single-threaded: the forward pass splits work across its thread pool (per token / head)
// and calls these on each piece.
//
// Stable interface for the forward pass; new functions are announced here:
//   v1: dot, axpy, add, scale, rmsnorm, swiglu, softmax, max_value, to_f32_from_f16/bf16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/model_config.h"
#include "engine/kernels/cpu_features.h"

namespace pith {

// sum_i a[i] * b[i] (f32 accumulation in 8/16 lanes).
float dot(const float* a, const float* b, size_t n, KernelIsa isa = best_isa());

// y[i] += a * x[i]
void axpy(float a, const float* x, float* y, size_t n, KernelIsa isa = best_isa());

// y[i] += x[i]  (residual connection)
void add(const float* x, float* y, size_t n, KernelIsa isa = best_isa());

// x[i] *= a
void scale(float* x, float a, size_t n, KernelIsa isa = best_isa());

// y[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]. y may equal x (in place).
void rmsnorm(const float* x, const float* weight, float* y, size_t n, float eps,
             KernelIsa isa = best_isa());

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). out may equal gate or up.
void swiglu(const float* gate, const float* up, float* out, size_t n, KernelIsa isa = best_isa());

// out[i] = gelu_tanh(gate[i]) * up[i] (Gemma's gated FFN; PyTorch's gelu(approximate="tanh")).
// out may equal gate or up.
void gelu_tanh_gate(const float* gate, const float* up, float* out, size_t n,
                    KernelIsa isa = best_isa());

// gpt-oss's clamped SwiGLU (FfnActivation::SwigluOai), as ggml's swiglu_oai computes it:
// g = min(gate, 7), u = clamp(up, -7, 7), out = g * sigmoid(1.702 g) * (u + 1). Scalar: the
// experts' matmuls dominate. out may equal gate or up.
void swiglu_oai(const float* gate, const float* up, float* out, size_t n);
// The family's gated activation of n values (swiglu, gelu_tanh_gate or swiglu_oai).
void gated_activation(FfnActivation act, const float* gate, const float* up, float* out, size_t n);

// In place: x[i] = exp(x[i] - max) / sum. Returns log(sum_i exp(x[i])) of the input (the
// log-partition, for log-probabilities). n must be > 0. Entries equal to -inf (masked) get 0.
float softmax(float* x, size_t n, KernelIsa isa = best_isa());

// max_i x[i]; n must be > 0.
float max_value(const float* x, size_t n, KernelIsa isa = best_isa());

// Bulk conversions of 16-bit float rows to f32 (F16C / shifts).
void f16_to_f32_row(const uint16_t* src, float* dst, size_t n, KernelIsa isa = best_isa());
void bf16_to_f32_row(const uint16_t* src, float* dst, size_t n, KernelIsa isa = best_isa());
// And back, rounding to nearest even (the scalar f32_to_f16 / f32_to_bf16 of common/fp16.h).
void f32_to_f16_row(const float* src, uint16_t* dst, size_t n, KernelIsa isa = best_isa());
void f32_to_bf16_row(const float* src, uint16_t* dst, size_t n, KernelIsa isa = best_isa());

}  // namespace pith
