// Size accounting over a loaded model's matrices.
#include "engine/model_weights.h"

#include "common/error.h"

namespace pith {

namespace {
template <typename Fn>
void for_each_matrix(const ModelWeights& w, Fn&& fn) {
  fn(w.token_embd);
  for (const auto& l : w.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      fn(*m);
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

namespace {

void check_matrix(const WeightMatrix& m, size_t rows, size_t cols, const char* name, size_t layer) {
  if (m.data == nullptr || m.rows != rows || m.cols != cols)
    fail("engine: weight {} (layer {}) is [{}][{}]{}, expected [{}][{}]", name, layer, m.rows,
         m.cols, m.data ? "" : " without data", rows, cols);
}

void check_vector(const std::vector<float>& v, size_t n, const char* name, size_t layer) {
  if (v.size() != n)
    fail("engine: {} (layer {}) has {} entries, expected {}", name, layer, v.size(), n);
}

}  // namespace

void validate_model_shapes(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  if (c.n_layers == 0 || c.d_model == 0 || c.n_heads == 0 || c.n_kv_heads == 0 || c.head_dim == 0 ||
      c.d_ff == 0 || c.vocab_size == 0)
    fail("engine: model '{}' has an empty dimension", w.source);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("engine: {} query heads is not a multiple of {} KV heads", c.n_heads, c.n_kv_heads);
  if (w.layers.size() != c.n_layers)
    fail("engine: model has {} layers of weights, config says {}", w.layers.size(), c.n_layers);
  check_matrix(w.token_embd, c.vocab_size, c.d_model, "token_embd", 0);
  check_matrix(w.output, c.vocab_size, c.d_model, "output", 0);
  check_vector(w.output_norm, c.d_model, "output_norm", 0);
  for (size_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    check_vector(L.attn_norm, c.d_model, "attn_norm", l);
    check_vector(L.ffn_norm, c.d_model, "ffn_norm", l);
    check_matrix(L.wq, c.q_dim(), c.d_model, "attn_q", l);
    check_matrix(L.wk, c.kv_dim(), c.d_model, "attn_k", l);
    check_matrix(L.wv, c.kv_dim(), c.d_model, "attn_v", l);
    check_matrix(L.wo, c.d_model, c.q_dim(), "attn_output", l);
    check_matrix(L.w_gate, c.d_ff, c.d_model, "ffn_gate", l);
    check_matrix(L.w_up, c.d_ff, c.d_model, "ffn_up", l);
    check_matrix(L.w_down, c.d_model, c.d_ff, "ffn_down", l);
  }
}

}  // namespace pith
