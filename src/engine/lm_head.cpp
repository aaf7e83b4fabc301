// Fused LM head -> top-K distributions. See lm_head.h.
#include "engine/lm_head.h"

#include <algorithm>

namespace pith {

void lm_head_top_k(ThreadPool& pool, const WeightMatrix& w, const float* h, size_t n_rows,
                   const uint32_t* ks, LmHeadScratch& s, TokenDistribution* out) {
  if (n_rows == 0) return;
  const size_t vocab = w.rows;
  const size_t n_blocks = (vocab + kMatmulBlockRows - 1) / kMatmulBlockRows;
  s.partials.assign(n_rows * n_blocks, SoftmaxPartial{});
  if (s.selectors.size() < pool.size() * n_rows) s.selectors.resize(pool.size() * n_rows);
  for (size_t wk = 0; wk < pool.size(); ++wk)
    for (size_t r = 0; r < n_rows; ++r)
      s.selectors[wk * n_rows + r].reset(static_cast<uint32_t>(std::min<size_t>(ks[r], vocab)));

  matmul_blocks(pool, w, h, n_rows, [&](const MatmulBlock& b) {
    const size_t block = b.r0 / kMatmulBlockRows;
    for (size_t t = 0; t < b.n_tokens; ++t) {
      const float* logits = b.y + t * b.n_rows;
      const size_t r = b.t0 + t;
      s.partials[r * n_blocks + block] = softmax_partial(logits, b.n_rows);
      s.selectors[b.worker * n_rows + r].scan(logits, b.n_rows, static_cast<int32_t>(b.r0));
    }
  });

  pool.parallel_for(n_rows, [&](size_t r, size_t) {
    TopKSelector& sel = s.selectors[r];
    for (size_t wk = 1; wk < pool.size(); ++wk) sel.merge(s.selectors[wk * n_rows + r]);
    out[r] = sel.distribution(combine_logsumexp(&s.partials[r * n_blocks], n_blocks));
  });
}

}  // namespace pith
