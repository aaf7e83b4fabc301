// Scalar and AVX2 implementations of the vector helpers, and the per-call dispatch. The
// AVX-512 level uses the AVX2 code: these loops are short (one hidden vector) and bound by
// loads, so 512-bit versions would not pay for their extra code.
#include "engine/kernels/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/kernels/simd_avx2.h"

namespace pith {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;

inline float scalar_gelu_tanh(float g) {
  return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
}

bool use_avx2(KernelIsa isa) {
  if (isa == KernelIsa::Scalar) return false;
  if (!isa_supported(isa)) fail("kernel ISA '{}' is not supported by this CPU", isa_name(isa));
  return true;
}

namespace scalar {

float dot(const float* a, const float* b, size_t n) {
  float acc = 0;
  for (size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

float softmax(float* x, size_t n) {
  float m = *std::max_element(x, x + n);
  if (m == -std::numeric_limits<float>::infinity()) fail("softmax: every entry is -inf");
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
  return m + static_cast<float>(std::log(sum));
}

}  // namespace scalar

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace vavx2 {

float dot(const float* a, const float* b, size_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  if (i < n) {
    __m256i m = avx2::tail_mask(n - i);
    acc1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc1);
  }
  return avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

void axpy(float a, const float* x, float* y, size_t n) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

void add(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void scale(float* x, float a, size_t n) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) x[i] *= a;
}

void rmsnorm(const float* x, const float* w, float* y, size_t n, float eps) {
  float ss = dot(x, x, n);
  float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  __m256 vinv = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) y[i] = x[i] * inv * w[i];
}

void swiglu(const float* gate, const float* up, float* out, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 e = avx2::exp(_mm256_xor_ps(g, sign));  // exp(-g)
    __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// gelu_tanh(g) = 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3).
void gelu_tanh_gate(const float* gate, const float* up, float* out, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 k0 = _mm256_set1_ps(-2.0f * kSqrt2OverPi);
  const __m256 k1 = _mm256_set1_ps(0.044715f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(k1, g), _mm256_mul_ps(g, g), g);
    __m256 e = avx2::exp(_mm256_mul_ps(k0, inner));
    __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = scalar_gelu_tanh(gate[i]) * up[i];
}

float max_value(const float* x, size_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  float r = avx2::hmax(m);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

float softmax(float* x, size_t n) {
  float m = max_value(x, n);
  if (m == -std::numeric_limits<float>::infinity()) fail("softmax: every entry is -inf");
  __m256 vm = _mm256_set1_ps(m);
  __m256 vsum = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = avx2::hsum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  scale(x, 1.0f / sum, n);
  return m + std::log(sum);
}

void f16_to_f32_row(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_f16(src + i));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_bf16(src + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void f32_to_f16_row(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

// Round to nearest even (NaN kept a quiet NaN), as f32_to_bf16: add 0x7fff plus the kept
// low bit, then take the high halves of 8 words with one pack.
void f32_to_bf16_row(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(x);
    __m256i r = _mm256_add_epi32(
        u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
    r = _mm256_srli_epi32(r, 16);
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace vavx2
#pragma GCC pop_options

}  // namespace

float dot(const float* a, const float* b, size_t n, KernelIsa isa) {
  return use_avx2(isa) ? vavx2::dot(a, b, n) : scalar::dot(a, b, n);
}

void axpy(float a, const float* x, float* y, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::axpy(a, x, y, n);
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void add(const float* x, float* y, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::add(x, y, n);
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale(float* x, float a, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::scale(x, a, n);
  for (size_t i = 0; i < n; ++i) x[i] *= a;
}

void rmsnorm(const float* x, const float* weight, float* y, size_t n, float eps, KernelIsa isa) {
  if (n == 0) return;
  if (use_avx2(isa)) return vavx2::rmsnorm(x, weight, y, n, eps);
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  float inv = static_cast<float>(1.0 / std::sqrt(ss / double(n) + eps));
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * weight[i];
}

void swiglu(const float* gate, const float* up, float* out, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::swiglu(gate, up, out, n);
  for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_gate(const float* gate, const float* up, float* out, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::gelu_tanh_gate(gate, up, out, n);
  for (size_t i = 0; i < n; ++i) out[i] = scalar_gelu_tanh(gate[i]) * up[i];
}

void swiglu_oai(const float* gate, const float* up, float* out, size_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (size_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit), u = std::clamp(up[i], -kLimit, kLimit);
    out[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
  }
}

void gated_activation(FfnActivation act, const float* gate, const float* up, float* out, size_t n) {
  switch (act) {
    case FfnActivation::Silu:
      return swiglu(gate, up, out, n);
    case FfnActivation::GeluTanh:
      return gelu_tanh_gate(gate, up, out, n);
    case FfnActivation::SwigluOai:
      return swiglu_oai(gate, up, out, n);
  }
}

float softmax(float* x, size_t n, KernelIsa isa) {
  if (n == 0) fail("softmax: empty input");
  return use_avx2(isa) ? vavx2::softmax(x, n) : scalar::softmax(x, n);
}

float max_value(const float* x, size_t n, KernelIsa isa) {
  if (n == 0) fail("max_value: empty input");
  return use_avx2(isa) ? vavx2::max_value(x, n) : *std::max_element(x, x + n);
}

void f16_to_f32_row(const uint16_t* src, float* dst, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::f16_to_f32_row(src, dst, n);
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::bf16_to_f32_row(src, dst, n);
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void f32_to_f16_row(const float* src, uint16_t* dst, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::f32_to_f16_row(src, dst, n);
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, size_t n, KernelIsa isa) {
  if (use_avx2(isa)) return vavx2::f32_to_bf16_row(src, dst, n);
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace pith
