// Size accounting over a loaded model's matrices.
#include "engine/model_weights.h"

namespace pith {

namespace {
template <typename Fn>
void for_each_matrix(const ModelWeights& w, Fn&& fn) {
  fn(w.token_embd);
  for (const auto& l : w.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) fn(*m);
  if (!w.config.tied_output) fn(w.output);
}
}  // namespace

size_t ModelWeights::weight_bytes() const {
  size_t bytes = 0;
  for_each_matrix(*this, [&](const WeightMatrix& m) { bytes += m.rows * m.row_bytes(); });
  return bytes;
}

size_t ModelWeights::n_params() const {
  size_t n = 0;
  for_each_matrix(*this, [&](const WeightMatrix& m) { n += m.rows * m.cols; });
  n += output_norm.size();
  for (const auto& l : layers) n += l.attn_norm.size() + l.ffn_norm.size();
  return n;
}

}  // namespace pith
