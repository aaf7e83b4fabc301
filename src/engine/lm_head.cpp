// Fused LM head -> top-K distributions. See lm_head.h.
#include "engine/lm_head.h"

#include <algorithm>
#include <cmath>

namespace pith {

void lm_head_top_k(ThreadPool& pool, const WeightMatrix& w, const float* h, size_t n_rows,
                   const uint32_t* ks, LmHeadScratch& s, TokenDistribution* out, float softcap,
                   const uint64_t* const* allowed, const LogitAdjustments* const* adjust) {
  if (n_rows == 0) return;
  const size_t vocab = w.rows;
  const size_t n_blocks = (vocab + kMatmulBlockRows - 1) / kMatmulBlockRows;
  s.partials.assign(n_rows * n_blocks, SoftmaxPartial{});
  if (s.selectors.size() < pool.size() * n_rows) s.selectors.resize(pool.size() * n_rows);
  for (size_t wk = 0; wk < pool.size(); ++wk)
    for (size_t r = 0; r < n_rows; ++r)
      s.selectors[wk * n_rows + r].reset(static_cast<uint32_t>(std::min<size_t>(ks[r], vocab)));
  if (s.block.size() < pool.size()) s.block.resize(pool.size());

  matmul_blocks(pool, w, h, n_rows, [&](const MatmulBlock& b) {
    const size_t block = b.r0 / kMatmulBlockRows;
    for (size_t t = 0; t < b.n_tokens; ++t) {
      const float* logits = b.y + t * b.n_rows;
      const size_t r = b.t0 + t;
      // The row's adjustments that fall in this block (sorted by token).
      const LogitAdjustment *a0 = nullptr, *a1 = nullptr;
      if (adjust && adjust[r]) {
        const LogitAdjustments& a = *adjust[r];
        auto by_token = [](const LogitAdjustment& e, size_t id) { return e.token < id; };
        a0 = std::lower_bound(a.data(), a.data() + a.size(), b.r0, by_token);
        a1 = std::lower_bound(a0, a.data() + a.size(), b.r0 + b.n_rows, by_token);
      }
      if (softcap > 0 || a0 != a1) {  // matmul's block stays as computed: work on a copy
        std::vector<float>& c = s.block[b.worker];
        c.assign(logits, logits + b.n_rows);
        if (softcap > 0) soft_cap(c.data(), b.n_rows, softcap);
        for (const LogitAdjustment* e = a0; e != a1; ++e)
          c[e->token - b.r0] = adjust_logit(c[e->token - b.r0], *e);
        logits = c.data();
      }
      s.partials[r * n_blocks + block] = softmax_partial(logits, b.n_rows);
      TopKSelector& sel = s.selectors[b.worker * n_rows + r];
      if (allowed && allowed[r])
        sel.scan_allowed(logits, b.n_rows, static_cast<int32_t>(b.r0), allowed[r]);
      else
        sel.scan(logits, b.n_rows, static_cast<int32_t>(b.r0));
    }
  });

  pool.parallel_for(n_rows, [&](size_t r, size_t) {
    TopKSelector& sel = s.selectors[r];
    for (size_t wk = 1; wk < pool.size(); ++wk) sel.merge(s.selectors[wk * n_rows + r]);
    out[r] = sel.distribution(combine_logsumexp(&s.partials[r * n_blocks], n_blocks));
  });
}

void soft_cap(float* x, size_t n, float softcap) {
  const float inv = 1.0f / softcap;
  for (size_t i = 0; i < n; ++i) x[i] = softcap * std::tanh(x[i] * inv);
}

}  // namespace pith
