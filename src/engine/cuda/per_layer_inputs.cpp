// Per-layer token embeddings on the device. See per_layer_inputs.h.
#include "engine/cuda/per_layer_inputs.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/kernels.h"

namespace pith::cuda {

PerLayerInputs::PerLayerInputs(const ModelConfig& c, DType act) : c_(c), act_(act) {}

size_t PerLayerInputs::token_bytes(const ModelConfig& c, DType act) {
  if (c.d_per_layer_input == 0) return 0;
  const size_t e = elem_bytes(act), all = size_t{c.n_layers} * c.d_per_layer_input;
  return c.d_model * e + all * (8 + 2 * e) + c.d_per_layer_input * e;
}

void PerLayerInputs::ensure(uint32_t n_tokens) {
  if (c_.d_per_layer_input == 0 || n_tokens <= tokens_) return;
  const size_t t = std::max(n_tokens, tokens_ + tokens_ / 2), e = elem_bytes(act_);
  const size_t all = size_t{c_.n_layers} * c_.d_per_layer_input;
  x_act_.reserve(t * c_.d_model * e);
  proj_.reserve(t * all * 4);
  rows_.reserve(t * all * 4);
  in_.reserve(t * all * e);
  gate_.reserve(t * all * e);
  mixed_.reserve(t * c_.d_per_layer_input * e);
  tokens_ = static_cast<uint32_t>(t);
}

size_t PerLayerInputs::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b : {&x_act_, &proj_, &rows_, &in_, &gate_, &mixed_}) n += b->bytes();
  return n;
}

void PerLayerInputs::mix_addresses(Fingerprint& f) const {
  for (const DeviceBuffer* b : {&x_act_, &proj_, &rows_, &in_, &gate_, &mixed_}) f.mix(b->get());
}

void PerLayerInputs::prepare(const DeviceWeights& w, const float* x, const int32_t* tokens,
                             uint32_t T, Gemm& gemm, cudaStream_t s) {
  PITH_CHECK(T <= tokens_);
  const uint32_t d = c_.d_model, dpl = c_.d_per_layer_input, all = c_.n_layers * dpl;
  float* proj = proj_.as<float>();
  float* rows = rows_.as<float>();
  convert_rows(x, T, d, x_act_.get(), act_, s);
  gemm.run(w.ple_model_proj, x_act_.get(), T, proj, DType::F32, s);
  scale_rows(proj, size_t{T} * all, 1.0f / std::sqrt(static_cast<float>(d)), s);
  rmsnorm_rows(proj, DType::F32, T * c_.n_layers, dpl, w.ple_proj_norm, c_.rms_eps, s);
  embed_rows(w.ple_token_embd.data, w.ple_token_embd.dtype, tokens, T, all, rows, s);
  scale_rows(rows, size_t{T} * all, std::sqrt(static_cast<float>(dpl)), s);
  add_rows(proj, rows, DType::F32, T, all, s);
  scale_rows(proj, size_t{T} * all, 1.0f / std::sqrt(2.0f), s);
  convert_rows(proj, T, all, in_.get(), act_, s);
}

void PerLayerInputs::apply(const DeviceLayer& L, uint32_t layer, float* x, uint32_t T,
                           float* scratch, Gemm& gemm, cudaStream_t s) {
  PITH_CHECK(T <= tokens_ && layer < c_.n_layers);
  const uint32_t d = c_.d_model, dpl = c_.d_per_layer_input, all = c_.n_layers * dpl;
  const size_t e = elem_bytes(act_);
  convert_rows(x, T, d, x_act_.get(), act_, s);
  // The gate rows are written `all` apart so they share a leading dimension with the layer's
  // column slice of `in` (one gated_activation over both).
  gemm.run(L.ple_gate, x_act_.get(), T, gate_.get(), act_, s, all);
  gated_activation(gate_.get(), static_cast<const char*>(in_.get()) + size_t{layer} * dpl * e, T,
                   dpl, all, mixed_.get(), act_, FfnActivation::GeluTanh, s);
  gemm.run(L.ple_proj, mixed_.get(), T, scratch, DType::F32, s);
  add_rmsnorm(scratch, nullptr, L.ple_post_norm, T, d, c_.rms_eps, scratch, DType::F32, s);
  add_rows(x, scratch, DType::F32, T, d, s);
}

}  // namespace pith::cuda
