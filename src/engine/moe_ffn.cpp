// Mixture-of-experts FFN: routing, per-expert gathered SwiGLU, shared expert. See moe_ffn.h.
#include "engine/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Per-row biases of one expert's projections (gpt-oss), null where the family has none.
struct ExpertBiases {
  const float *gate = nullptr, *up = nullptr, *down = nullptr;
};

void add_bias_rows(const float* bias, float* rows, size_t n, size_t width) {
  if (bias)
    for (size_t i = 0; i < n; ++i) add(bias, rows + i * width, width);
}

// The gated FFN of n gathered rows x [n][d] through one expert: y = Wd (act(Wg x) * Wu x), act
// the family's (SiLU, GELU-tanh, clamped SwiGLU), with biases where it has them.
void expert_ffn(ThreadPool& pool, const ModelConfig& c, const WeightMatrix& wg,
                const WeightMatrix& wu, const WeightMatrix& wd, const float* x, size_t n,
                MoeScratch& s, float* y, const ExpertBiases& b = {}) {
  const size_t ff = wg.rows;
  float* g = grow(s.gate, n * ff);
  float* u = grow(s.up, n * ff);
  matmul(pool, wg, x, n, g);
  matmul(pool, wu, x, n, u);
  add_bias_rows(b.gate, g, n, ff);
  add_bias_rows(b.up, u, n, ff);
  gated_activation(c.ffn_activation, g, u, g, n * ff);
  matmul(pool, wd, g, n, y);
  add_bias_rows(b.down, y, n, wd.rows);
}

}  // namespace

void moe_ffn(ThreadPool& pool, const ModelConfig& c, const LayerWeights& L, const float* h,
             size_t T, float* out, MoeScratch& s, const float* router_in) {
  const uint32_t E = c.n_experts, K = c.n_experts_used, d = c.d_model;
  float* logits = grow(s.router, T * E);
  matmul(pool, L.router, router_in ? router_in : h, T, logits);
  s.routed.resize(E);
  for (auto& r : s.routed) r.clear();
  for (size_t t = 0; t < T; ++t) {
    float* p = logits + t * E;
    if (!L.router_bias.empty()) add(L.router_bias.data(), p, E);
    softmax(p, E);
    s.order.resize(E);
    for (uint32_t e = 0; e < E; ++e) s.order[e] = {-p[e], e};  // ascending: largest prob first
    std::partial_sort(s.order.begin(), s.order.begin() + K, s.order.end());
    float sum = 0;
    for (uint32_t k = 0; k < K; ++k) sum -= s.order[k].first;
    const float norm = c.moe_norm_top_k && sum > 0 ? 1.0f / sum : 1.0f;
    for (uint32_t k = 0; k < K; ++k) {
      const uint32_t e = s.order[k].second;
      const float scale = L.expert_scale.empty() ? 1.0f : L.expert_scale[e];
      s.routed[e].push_back({static_cast<uint32_t>(t), -s.order[k].first * norm * scale});
    }
  }

  std::memset(out, 0, T * d * sizeof(float));
  for (uint32_t e = 0; e < E; ++e) {
    const auto& tokens = s.routed[e];
    if (tokens.empty()) continue;
    const size_t n = tokens.size();
    float* x = grow(s.x, n * d);
    for (size_t i = 0; i < n; ++i)
      std::memcpy(x + i * d, h + size_t{tokens[i].first} * d, d * sizeof(float));
    float* y = grow(s.y, n * d);
    ExpertBiases b;
    if (!L.exp_gate_bias.empty())
      b = {L.exp_gate_bias.data() + size_t{e} * c.d_ff_expert,
           L.exp_up_bias.data() + size_t{e} * c.d_ff_expert,
           L.exp_down_bias.data() + size_t{e} * d};
    expert_ffn(pool, c, L.exp_gate[e], L.exp_up[e], L.exp_down[e], x, n, s, y, b);
    for (size_t i = 0; i < n; ++i)
      axpy(tokens[i].second, y + i * d, out + size_t{tokens[i].first} * d, d);
  }

  if (c.d_ff_shared_expert > 0) {
    float* y = grow(s.y, T * d);
    expert_ffn(pool, c, L.sh_gate, L.sh_up, L.sh_down, h, T, s, y);
    for (size_t t = 0; t < T; ++t) {
      const float g = dot(L.sh_gate_inp.data(), h + t * d, d);
      axpy(1.0f / (1.0f + std::exp(-g)), y + t * d, out + t * d, d);
    }
  }
}

}  // namespace pith
