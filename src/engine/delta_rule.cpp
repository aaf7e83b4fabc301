// Gated delta rule and the causal convolution of Gated DeltaNet layers. See delta_rule.h.
#include "engine/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/simd_avx2.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

float* grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

const float** grow_ptrs(std::vector<const float*>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// The state passes of the two forms: a generic version over the vector helpers, and AVX2 ones
// (also used on AVX-512 CPUs: rows of 128 floats are short, the work is in keeping each row in
// registers or L1 while it is used).
namespace generic {

// One token of the recurrent form: each row j of S changes only through its own value
// dimension, so decay, read, write and output happen in one visit of the row.
void recurrent_token(float* S, const float* q, const float* k, const float* v, float decay,
                     float beta, float q_scale, float* o, uint32_t dk, uint32_t dv) {
  for (uint32_t j = 0; j < dv; ++j) {
    float* row = S + size_t{j} * dk;
    scale(row, decay, dk);
    const float u = (v[j] - dot(row, k, dk)) * beta;
    axpy(u, k, row, dk);
    o[j] = dot(row, q, dk) * q_scale;
  }
}

// out_k[i][r] = rows[r] . k[i] and out_q[i][r] = q_scale * rows[r] . q[i] (rows of a state
// matrix, or the keys of a chunk), out rows `out_stride` apart.
void products(const float* const* rows, uint32_t n_rows, const float* const* k,
              const float* const* q, uint32_t L, float q_scale, float* out_k, float* out_q,
              size_t out_stride, uint32_t dk) {
  for (uint32_t r = 0; r < n_rows; ++r)
    for (uint32_t i = 0; i < L; ++i) {
      out_k[i * out_stride + r] = dot(rows[r], k[i], dk);
      out_q[i * out_stride + r] = dot(rows[r], q[i], dk) * q_scale;
    }
}

// out = base_scale * base + sum_{s < count} coef[s] * rows[s] (rows `stride` apart, n floats).
// out may equal base.
void accumulate(float* out, const float* base, float base_scale, const float* coef,
                const float* rows, size_t stride, uint32_t count, uint32_t n) {
  for (uint32_t c = 0; c < n; ++c) out[c] = base_scale * base[c];
  for (uint32_t s = 0; s < count; ++s) axpy(coef[s], rows + s * stride, out, n);
}

// S_j <- e_last S_j + sum_i coef[i] u[i][j] k_i, row by row.
void state_update(float* S, const float* const* k, const float* u, const float* coef, uint32_t L,
                  float e_last, uint32_t dk, uint32_t dv) {
  for (uint32_t j = 0; j < dv; ++j) {
    float* row = S + size_t{j} * dk;
    scale(row, e_last, dk);
    for (uint32_t i = 0; i < L; ++i) axpy(coef[i] * u[i * dv + j], k[i], row, dk);
  }
}

}  // namespace generic

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace vavx2 {

// dk a multiple of 8 in every function here.
void recurrent_token(float* S, const float* q, const float* k, const float* v, float decay,
                     float beta, float q_scale, float* o, uint32_t dk, uint32_t dv) {
  const __m256 vdecay = _mm256_set1_ps(decay);
  for (uint32_t j = 0; j < dv; ++j) {
    float* row = S + size_t{j} * dk;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 16 <= dk; i += 16) {
      __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
      __m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8), vdecay);
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      a0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(k + i), a0);
      a1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(k + i + 8), a1);
    }
    for (; i < dk; i += 8) {
      __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
      _mm256_storeu_ps(row + i, r0);
      a0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(k + i), a0);
    }
    const __m256 vu = _mm256_set1_ps((v[j] - avx2::hsum(_mm256_add_ps(a0, a1))) * beta);
    a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (i = 0; i + 16 <= dk; i += 16) {
      __m256 r0 = _mm256_fmadd_ps(vu, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
      __m256 r1 = _mm256_fmadd_ps(vu, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(row + i + 8));
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      a0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(q + i), a0);
      a1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(q + i + 8), a1);
    }
    for (; i < dk; i += 8) {
      __m256 r0 = _mm256_fmadd_ps(vu, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
      _mm256_storeu_ps(row + i, r0);
      a0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(q + i), a0);
    }
    o[j] = avx2::hsum(_mm256_add_ps(a0, a1)) * q_scale;
  }
}

// Four rows against one token's key and query per pass: 6 loads feed 8 FMAs.
void products(const float* const* rows, uint32_t n_rows, const float* const* k,
              const float* const* q, uint32_t L, float q_scale, float* out_k, float* out_q,
              size_t out_stride, uint32_t dk) {
  uint32_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    const float *r0 = rows[r], *r1 = rows[r + 1], *r2 = rows[r + 2], *r3 = rows[r + 3];
    for (uint32_t i = 0; i < L; ++i) {
      __m256 k0 = _mm256_setzero_ps(), k1 = k0, k2 = k0, k3 = k0;
      __m256 q0 = _mm256_setzero_ps(), q1 = q0, q2 = q0, q3 = q0;
      const float* ki = k[i];
      const float* qi = q[i];
      for (uint32_t c = 0; c < dk; c += 8) {
        const __m256 kv = _mm256_loadu_ps(ki + c), qv = _mm256_loadu_ps(qi + c);
        const __m256 s0 = _mm256_loadu_ps(r0 + c), s1 = _mm256_loadu_ps(r1 + c);
        const __m256 s2 = _mm256_loadu_ps(r2 + c), s3 = _mm256_loadu_ps(r3 + c);
        k0 = _mm256_fmadd_ps(s0, kv, k0);
        k1 = _mm256_fmadd_ps(s1, kv, k1);
        k2 = _mm256_fmadd_ps(s2, kv, k2);
        k3 = _mm256_fmadd_ps(s3, kv, k3);
        q0 = _mm256_fmadd_ps(s0, qv, q0);
        q1 = _mm256_fmadd_ps(s1, qv, q1);
        q2 = _mm256_fmadd_ps(s2, qv, q2);
        q3 = _mm256_fmadd_ps(s3, qv, q3);
      }
      float* oki = out_k + i * out_stride + r;
      float* oqi = out_q + i * out_stride + r;
      oki[0] = avx2::hsum(k0), oki[1] = avx2::hsum(k1), oki[2] = avx2::hsum(k2);
      oki[3] = avx2::hsum(k3);
      oqi[0] = avx2::hsum(q0) * q_scale, oqi[1] = avx2::hsum(q1) * q_scale;
      oqi[2] = avx2::hsum(q2) * q_scale, oqi[3] = avx2::hsum(q3) * q_scale;
    }
  }
  if (r < n_rows)
    generic::products(rows + r, n_rows - r, k, q, L, q_scale, out_k + r, out_q + r, out_stride, dk);
}

// out = base_scale * base + sum_s coef[s] * rows[s], 64 floats at a time in eight registers.
void accumulate(float* out, const float* base, float base_scale, const float* coef,
                const float* rows, size_t stride, uint32_t count, uint32_t n) {
  const __m256 vb = _mm256_set1_ps(base_scale);
  for (uint32_t c0 = 0; c0 < n; c0 += 64) {
    const uint32_t nb = std::min<uint32_t>(64, n - c0) / 8;
    __m256 acc[8];
    for (uint32_t b = 0; b < nb; ++b)
      acc[b] = _mm256_mul_ps(_mm256_loadu_ps(base + c0 + 8 * b), vb);
    for (uint32_t s = 0; s < count; ++s) {
      const __m256 w = _mm256_set1_ps(coef[s]);
      const float* row = rows + s * stride + c0;
      for (uint32_t b = 0; b < nb; ++b)
        acc[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 8 * b), acc[b]);
    }
    for (uint32_t b = 0; b < nb; ++b) _mm256_storeu_ps(out + c0 + 8 * b, acc[b]);
  }
}

// A row's 64-float block stays in eight registers while every token of the chunk adds to it.
void state_update(float* S, const float* const* k, const float* u, const float* coef, uint32_t L,
                  float e_last, uint32_t dk, uint32_t dv) {
  const __m256 ve = _mm256_set1_ps(e_last);
  for (uint32_t j = 0; j < dv; ++j) {
    float* row = S + size_t{j} * dk;
    for (uint32_t c0 = 0; c0 < dk; c0 += 64) {
      const uint32_t nb = std::min<uint32_t>(64, dk - c0) / 8;
      __m256 acc[8];
      for (uint32_t b = 0; b < nb; ++b)
        acc[b] = _mm256_mul_ps(_mm256_loadu_ps(row + c0 + 8 * b), ve);
      for (uint32_t i = 0; i < L; ++i) {
        const __m256 w = _mm256_set1_ps(coef[i] * u[size_t{i} * dv + j]);
        const float* ki = k[i] + c0;
        for (uint32_t b = 0; b < nb; ++b)
          acc[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(ki + 8 * b), acc[b]);
      }
      for (uint32_t b = 0; b < nb; ++b) _mm256_storeu_ps(row + c0 + 8 * b, acc[b]);
    }
  }
}

}  // namespace vavx2
#pragma GCC pop_options

// The AVX2 kernels need rows of whole 8-float vectors (keys and values: dk, dv).
bool use_avx2(uint32_t dk, uint32_t dv) {
  return dk % 8 == 0 && dv % 8 == 0 && best_isa() != KernelIsa::Scalar;
}

}  // namespace

void delta_rule_recurrent(float* S, const DeltaRuleInputs& in, uint32_t n, uint32_t dk,
                          uint32_t dv) {
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const auto token = use_avx2(dk, dv) ? vavx2::recurrent_token : generic::recurrent_token;
  for (uint32_t t = 0; t < n; ++t)
    token(S, in.q + t * in.q_stride, in.k + t * in.k_stride, in.v + t * in.v_stride,
          std::exp(in.g[t * in.g_stride]), in.beta[t * in.g_stride], q_scale,
          in.out + t * in.out_stride, dk, dv);
}

void delta_rule_chunked(float* S, const DeltaRuleInputs& in, uint32_t n, uint32_t dk, uint32_t dv,
                        DeltaRuleScratch& s) {
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  constexpr uint32_t C = kDeltaRuleChunk;
  float* G = grow(s.cum_g, C);
  float* kk = grow(s.kk, size_t{C} * C);
  float* qk = grow(s.qk, size_t{C} * C);
  float* u = grow(s.u, size_t{C} * dv);
  float* sq = grow(s.s_q, size_t{C} * dv);
  float* coef = grow(s.coef, C);
  const float** state_rows = grow_ptrs(s.rows, dv);
  for (uint32_t j = 0; j < dv; ++j) state_rows[j] = S + size_t{j} * dk;
  const bool avx2 = use_avx2(dk, dv);
  const auto products = avx2 ? vavx2::products : generic::products;
  const auto accumulate = avx2 ? vavx2::accumulate : generic::accumulate;
  for (uint32_t t0 = 0; t0 < n; t0 += C) {
    const uint32_t L = std::min(C, n - t0);
    const float* ks[kDeltaRuleChunk];
    const float* qs[kDeltaRuleChunk];
    for (uint32_t i = 0; i < L; ++i) {
      ks[i] = in.k + (t0 + i) * in.k_stride;
      qs[i] = in.q + (t0 + i) * in.q_stride;
    }
    float acc = 0;
    for (uint32_t i = 0; i < L; ++i) G[i] = acc += in.g[(t0 + i) * in.g_stride];

    // Key-key and query-key products inside the chunk (kk[i][s] = k_s . k_i, qk[i][s] =
    // k_s . q_i / sqrt(dk); the full squares, of which the lower triangles are used), and
    // S_0 k_i (into u, overwritten below) and S_0 q_i for every token.
    products(ks, L, ks, qs, L, q_scale, kk, qk, C, dk);
    products(state_rows, dv, ks, qs, L, q_scale, u, sq, dv, dk);
    // Writes by forward substitution: u_i = beta_i (v_i - e^{G_i} S_0 k_i)
    //                                       - sum_{s<i} beta_i e^{G_i - G_s} (k_s . k_i) u_s.
    for (uint32_t i = 0; i < L; ++i) {
      float* ui = u + i * dv;
      const float eg = std::exp(G[i]), b = in.beta[(t0 + i) * in.g_stride];
      const float* vi = in.v + (t0 + i) * in.v_stride;
      for (uint32_t j = 0; j < dv; ++j) ui[j] = b * (vi[j] - eg * ui[j]);
      for (uint32_t s2 = 0; s2 < i; ++s2) coef[s2] = -b * std::exp(G[i] - G[s2]) * kk[i * C + s2];
      accumulate(ui, ui, 1.0f, coef, u, dv, i, dv);
    }
    // Outputs: o_i = e^{G_i} S_0 q_i + sum_{s<=i} e^{G_i - G_s} (q_i . k_s) u_s.
    for (uint32_t i = 0; i < L; ++i) {
      for (uint32_t s2 = 0; s2 <= i; ++s2) coef[s2] = std::exp(G[i] - G[s2]) * qk[i * C + s2];
      accumulate(in.out + (t0 + i) * in.out_stride, sq + i * dv, std::exp(G[i]), coef, u, dv, i + 1,
                 dv);
    }
    // State: S <- e^{G_last} S + sum_s e^{G_last - G_s} u_s k_s^T, row by row.
    const float g_last = G[L - 1];
    for (uint32_t i = 0; i < L; ++i) coef[i] = std::exp(g_last - G[i]);
    (avx2 ? vavx2::state_update : generic::state_update)(S, ks, u, coef, L, std::exp(g_last), dk,
                                                         dv);
  }
}

void causal_conv_silu(const float* w, float* window, size_t stride, const float* x, size_t x_stride,
                      float* out, size_t out_stride, uint32_t n, uint32_t channels,
                      uint32_t kernel) {
  const uint32_t hist = kernel - 1;
  // Row i of the extended sequence (window, then x): i < hist is window row i.
  auto input = [&](size_t i) { return i < hist ? window + i * stride : x + (i - hist) * x_stride; };
  for (uint32_t t = 0; t < n; ++t) {
    float* o = out + t * out_stride;
    std::memset(o, 0, channels * sizeof(float));
    for (uint32_t i = 0; i < kernel; ++i) {
      const float* row = input(t + i);
      const float* wi = w + i * stride;
      for (uint32_t c = 0; c < channels; ++c) o[c] += wi[c] * row[c];
    }
    for (uint32_t c = 0; c < channels; ++c) o[c] = silu(o[c]);
  }
  // The new window: the last `hist` rows of the extended sequence (window rows shift first).
  const size_t total = size_t{hist} + n;
  for (uint32_t r = 0; r < hist; ++r) {
    const size_t i = total - hist + r;
    if (i < hist)
      std::memmove(window + r * stride, window + i * stride, channels * sizeof(float));
    else
      std::memcpy(window + r * stride, x + (i - hist) * x_stride, channels * sizeof(float));
  }
}

void l2_normalize(float* x, uint32_t n, float eps) {
  scale(x, 1.0f / std::sqrt(dot(x, x, n) + eps), n);
}

}  // namespace pith
