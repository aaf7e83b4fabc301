#include "engine/lora_delta.h"

#include <cstring>

#include "engine/kernels/vector_ops.h"

namespace pith {

void LoraBatch::clear() {
  groups_.clear();
}

void LoraBatch::add_run(const LoraAdapter* adapter, size_t first, size_t n) {
  if (adapter == nullptr || n == 0) return;
  for (Group& g : groups_)
    if (g.adapter == adapter) {
      if (!g.runs.empty() && g.runs.back().first + g.runs.back().second == first)
        g.runs.back().second += n;  // adjacent sequences of one adapter stay one run
      else
        g.runs.push_back({first, n});
      g.n_tokens += n;
      return;
    }
  groups_.push_back({adapter, {{first, n}}, n});
}

void LoraBatch::apply(ThreadPool& pool, uint32_t layer, LoraTarget target, const float* x,
                      size_t in_dim, float* y, size_t out_dim) {
  for (const Group& g : groups_) {
    const LoraPair* p = g.adapter->pair(layer, target);
    if (p == nullptr) continue;
    const size_t n = g.n_tokens, r = p->rank();
    const float* xs = x + g.runs[0].first * in_dim;
    if (g.runs.size() > 1) {
      if (xg_.size() < n * in_dim) xg_.resize(n * in_dim);
      size_t at = 0;
      for (auto [first, count] : g.runs) {
        std::memcpy(xg_.data() + at * in_dim, x + first * in_dim, count * in_dim * sizeof(float));
        at += count;
      }
      xs = xg_.data();
    }
    if (u_.size() < n * r) u_.resize(n * r);
    if (v_.size() < n * out_dim) v_.resize(n * out_dim);
    matmul(pool, p->a, xs, n, u_.data());
    matmul(pool, p->b, u_.data(), n, v_.data());
    size_t at = 0;
    for (auto [first, count] : g.runs)
      for (size_t i = 0; i < count; ++i, ++at)
        axpy(p->scale, v_.data() + at * out_dim, y + (first + i) * out_dim, out_dim);
  }
}

}  // namespace pith
