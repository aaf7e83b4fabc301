// Gated delta rule and the causal convolution of Gated DeltaNet layers. See delta_rule.h.
#include "engine/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

}  // namespace

void delta_rule_recurrent(float* S, const DeltaRuleInputs& in, uint32_t n, uint32_t dk,
                          uint32_t dv) {
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (uint32_t t = 0; t < n; ++t) {
    const float* q = in.q + t * in.q_stride;
    const float* k = in.k + t * in.k_stride;
    const float* v = in.v + t * in.v_stride;
    const float decay = std::exp(in.g[t * in.g_stride]);
    const float beta = in.beta[t * in.g_stride];
    float* o = in.out + t * in.out_stride;
    // Each row j of S changes only through its own value dimension, so decay, write and read
    // happen in one pass over the row while it is in L1.
    for (uint32_t j = 0; j < dv; ++j) {
      float* row = S + size_t{j} * dk;
      scale(row, decay, dk);
      const float u = (v[j] - dot(row, k, dk)) * beta;
      axpy(u, k, row, dk);
      o[j] = dot(row, q, dk) * q_scale;
    }
  }
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
  for (uint32_t t0 = 0; t0 < n; t0 += C) {
    const uint32_t L = std::min(C, n - t0);
    auto q = [&](uint32_t i) { return in.q + (t0 + i) * in.q_stride; };
    auto k = [&](uint32_t i) { return in.k + (t0 + i) * in.k_stride; };
    auto v = [&](uint32_t i) { return in.v + (t0 + i) * in.v_stride; };
    auto beta = [&](uint32_t i) { return in.beta[(t0 + i) * in.g_stride]; };
    float acc = 0;
    for (uint32_t i = 0; i < L; ++i) G[i] = acc += in.g[(t0 + i) * in.g_stride];

    // Key-key and query-key products inside the chunk (lower triangles).
    for (uint32_t i = 0; i < L; ++i) {
      for (uint32_t s2 = 0; s2 < i; ++s2) kk[i * C + s2] = dot(k(i), k(s2), dk);
      for (uint32_t s2 = 0; s2 <= i; ++s2) qk[i * C + s2] = dot(q(i), k(s2), dk) * q_scale;
    }
    // S_0 k_i and S_0 q_i for every token: one pass over the state rows.
    for (uint32_t j = 0; j < dv; ++j) {
      const float* row = S + size_t{j} * dk;
      for (uint32_t i = 0; i < L; ++i) {
        u[i * dv + j] = dot(row, k(i), dk);
        sq[i * dv + j] = dot(row, q(i), dk) * q_scale;
      }
    }
    // Writes by forward substitution: u_i = beta_i (v_i - e^{G_i} S_0 k_i) - sum_{s<i} ...
    for (uint32_t i = 0; i < L; ++i) {
      float* ui = u + i * dv;
      const float eg = std::exp(G[i]), b = beta(i);
      const float* vi = v(i);
      for (uint32_t j = 0; j < dv; ++j) ui[j] = b * (vi[j] - eg * ui[j]);
      for (uint32_t s2 = 0; s2 < i; ++s2)
        axpy(-b * std::exp(G[i] - G[s2]) * kk[i * C + s2], u + s2 * dv, ui, dv);
    }
    // Outputs: o_i = e^{G_i} S_0 q_i + sum_{s<=i} e^{G_i - G_s} (q_i . k_s) u_s.
    for (uint32_t i = 0; i < L; ++i) {
      float* o = in.out + (t0 + i) * in.out_stride;
      const float eg = std::exp(G[i]);
      for (uint32_t j = 0; j < dv; ++j) o[j] = eg * sq[i * dv + j];
      for (uint32_t s2 = 0; s2 <= i; ++s2)
        axpy(std::exp(G[i] - G[s2]) * qk[i * C + s2], u + s2 * dv, o, dv);
    }
    // State: S <- e^{G_last} S + sum_s e^{G_last - G_s} u_s k_s^T, row by row.
    const float g_last = G[L - 1];
    for (uint32_t i = 0; i < L; ++i) coef[i] = std::exp(g_last - G[i]);
    const float e_last = std::exp(g_last);
    for (uint32_t j = 0; j < dv; ++j) {
      float* row = S + size_t{j} * dk;
      scale(row, e_last, dk);
      for (uint32_t i = 0; i < L; ++i) axpy(coef[i] * u[i * dv + j], k(i), row, dk);
    }
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
