// Bodies of the element-wise activation kernels: the gated FFN activations (SwiGLU, GELU-tanh),
// the residual add of a DType row into the F32 stream, F32 -> DType row conversion, and the
// families' small element-wise steps (bias rows, scaling, soft-capping). Arithmetic in F32 as
// the CPU engine's (vector_ops.h), one rounding to DType on the store.
#pragma once

#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kActivationThreads = 256;

// Each body takes N consecutive elements per step (N = 1, or a 16-byte vector of T when the
// launcher found rows and pointers aligned for it).

// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), written as
// g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) like the CPU's vector loop.
PITH_HD float gelu_tanh_f32(float g) {
  constexpr float k0 = -2.0f * 0.7978845608028654f;
  return g / (1.0f + exp_f32(k0 * (g + 0.044715f * g * g * g)));
}

// act(g) * u, act = SiLU or (kGelu) GELU-tanh: one formula for every kernel that gates.
template <bool kGelu>
PITH_HD float gated_f32(float g, float u) {
  return (kGelu ? gelu_tanh_f32(g) : g / (1.0f + exp_f32(-g))) * u;
}

// out[i][j] = act(gate[i][j]) * up[i][j], act = SiLU or (kGelu) GELU-tanh; gate/up rows of
// leading dimension ld.
template <uint32_t N, bool kGelu = false, class T>
PITH_HD void swiglu_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* gate, const T* up,
                         uint32_t n, uint32_t ff, uint32_t ld, T* out) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{n} * ff / N, [&](size_t grp) {
    size_t i = grp * N, src = (i / ff) * ld + i % ff;
    float g[N], u[N];
    load_n<N>(gate + src, g);
    load_n<N>(up + src, u);
    for (uint32_t e = 0; e < N; ++e) g[e] = gated_f32<kGelu>(g[e], u[e]);
    store_n<N>(out + i, g);
  });
}

// x[i][j] += bias[j] over n rows of d (the Q/K/V biases of qwen2 and phi-style layers).
template <uint32_t N, class T>
PITH_HD void add_bias_body(uint32_t block, uint32_t n_blocks, uint32_t t, T* x, const float* bias,
                           uint32_t n, uint32_t d) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{n} * d / N, [&](size_t grp) {
    size_t i = grp * N;
    float v[N], b[N];
    load_n<N>(x + i, v);
    load_n<N>(bias + i % d, b);
    for (uint32_t e = 0; e < N; ++e) v[e] += b[e];
    store_n<N>(x + i, v);
  });
}

// x[i] *= s (gemma's embedding scale), or with softcap > 0 x[i] = softcap * tanh(x[i] /
// softcap) (the final logit soft-cap), over `total` F32 elements.
template <uint32_t N>
PITH_HD void scale_body(uint32_t block, uint32_t n_blocks, uint32_t t, float* x, size_t total,
                        float s, float softcap) {
  grid_stride(block, n_blocks, t, kActivationThreads, total / N, [&](size_t grp) {
    float v[N];
    load_n<N>(x + grp * N, v);
    for (uint32_t e = 0; e < N; ++e)
      v[e] = softcap > 0 ? softcap * tanh_f32(v[e] * (1.0f / softcap)) : v[e] * s;
    store_n<N>(x + grp * N, v);
  });
}

// residual[i] += x[i] over `total` elements.
template <uint32_t N, class T>
PITH_HD void add_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, float* residual,
                           const T* x, size_t total) {
  grid_stride(block, n_blocks, t, kActivationThreads, total / N, [&](size_t grp) {
    float r[N], v[N];
    load_n<N>(residual + grp * N, r);
    load_n<N>(x + grp * N, v);
    for (uint32_t e = 0; e < N; ++e) r[e] += v[e];
    store_n<N>(residual + grp * N, r);
  });
}

template <uint32_t N, class T>
PITH_HD void convert_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t, const float* src,
                               size_t total, T* dst) {
  grid_stride(block, n_blocks, t, kActivationThreads, total / N, [&](size_t grp) {
    float v[N];
    load_n<N>(src + grp * N, v);
    store_n<N>(dst + grp * N, v);
  });
}

}  // namespace pith::cuda::kern
