// Gated DeltaNet token mixer over a batch. See gated_delta_net.h.
#include "engine/gated_delta_net.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/matmul.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

float* grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// log(1 + e^x), linear above 20 where the log term is below f32 resolution (as PyTorch).
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

constexpr uint32_t kConvBlock = 512;  // channels per convolution task
constexpr uint32_t kChunkedFrom = 4;  // inputs from which the chunked delta rule pays off

}  // namespace

void gated_delta_net(ThreadPool& pool, const ModelConfig& c, const LayerWeights& L, const float* h,
                     size_t T, std::span<const DeltaNetSequence> seqs, DeltaNetScratch& s,
                     float* out) {
  const DeltaNetConfig& dn = c.delta_net;
  const uint32_t C = dn.conv_channels(), key_dim = dn.key_dim(), value_dim = dn.value_dim();
  const uint32_t Hv = dn.v_heads, dk = dn.k_dim, dv = dn.v_dim, K = dn.conv_kernel;
  float* qkv = grow(s.qkv, T * C);
  float* mixed = grow(s.mixed, T * C);
  float* z = grow(s.z, T * value_dim);
  float* beta = grow(s.beta, T * Hv);
  float* gate = grow(s.gate, T * Hv);
  float* o = grow(s.out, T * value_dim);
  if (s.workers.size() < pool.size()) s.workers.resize(pool.size());

  matmul(pool, L.ssm_qkv, h, T, qkv);
  matmul(pool, L.ssm_gate, h, T, z);
  matmul(pool, L.ssm_beta, h, T, beta);
  matmul(pool, L.ssm_alpha, h, T, gate);

  // Convolution: per sequence (its window carries across calls), in blocks of channels.
  const uint32_t blocks = (C + kConvBlock - 1) / kConvBlock;
  pool.parallel_for(seqs.size() * blocks, [&](size_t task, size_t) {
    const DeltaNetSequence& sq = seqs[task / blocks];
    const uint32_t c0 = static_cast<uint32_t>(task % blocks) * kConvBlock;
    const uint32_t nc = std::min(kConvBlock, C - c0);
    causal_conv_silu(L.ssm_conv_t.data() + c0, sq.state + c0, C, qkv + size_t{sq.first} * C + c0, C,
                     mixed + size_t{sq.first} * C + c0, C, sq.n, nc, K);
  });

  // Per token: unit queries and keys, write strengths and log-decays.
  pool.parallel_for(T, [&](size_t t, size_t) {
    float* row = mixed + t * C;
    for (uint32_t hk = 0; hk < dn.k_heads; ++hk) {
      l2_normalize(row + hk * dk, dk, c.rms_eps);
      l2_normalize(row + key_dim + hk * dk, dk, c.rms_eps);
    }
    for (uint32_t hv = 0; hv < Hv; ++hv) {
      float& b = beta[t * Hv + hv];
      b = 1.0f / (1.0f + std::exp(-b));
      float& g = gate[t * Hv + hv];
      g = softplus(g + L.ssm_dt_bias[hv]) * L.ssm_a[hv];
    }
  });

  // The delta rule per (sequence, value head) on its state matrix.
  const size_t conv_floats = dn.conv_floats();
  pool.parallel_for(seqs.size() * Hv, [&](size_t task, size_t worker) {
    const DeltaNetSequence& sq = seqs[task / Hv];
    const uint32_t hv = static_cast<uint32_t>(task % Hv);
    const uint32_t hk = hv % dn.k_heads;
    const float* first = mixed + size_t{sq.first} * C;
    DeltaRuleInputs in;
    in.q = first + hk * dk;
    in.k = first + key_dim + hk * dk;
    in.v = first + 2 * key_dim + hv * dv;
    in.q_stride = in.k_stride = in.v_stride = C;
    in.g = gate + size_t{sq.first} * Hv + hv;
    in.beta = beta + size_t{sq.first} * Hv + hv;
    in.g_stride = Hv;
    in.out = o + size_t{sq.first} * value_dim + hv * dv;
    in.out_stride = value_dim;
    float* S = sq.state + conv_floats + size_t{hv} * dv * dk;
    if (sq.n < kChunkedFrom)
      delta_rule_recurrent(S, in, sq.n, dk, dv);
    else
      delta_rule_chunked(S, in, sq.n, dk, dv, s.workers[worker]);
  });

  // Gated output norm per head, then the output projection.
  pool.parallel_for(T, [&](size_t t, size_t) {
    for (uint32_t hv = 0; hv < Hv; ++hv) {
      float* oh = o + t * value_dim + hv * dv;
      rmsnorm(oh, L.ssm_norm.data(), oh, dv, c.rms_eps);
      swiglu(z + t * value_dim + hv * dv, oh, oh, dv);
    }
  });
  matmul(pool, L.ssm_out, o, T, out);
}

}  // namespace pith
