// Mixture-of-experts FFN on the device. See moe_layers.h.
#include "engine/cuda/moe_layers.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/kernels.h"

namespace pith::cuda {

MoeFfn::MoeFfn(const ModelConfig& c, DType act) : c_(c), act_(act) {}

size_t MoeFfn::token_bytes(const ModelConfig& c, DType act) {
  if (c.n_experts == 0) return 0;
  const size_t K = c.n_experts_used, e = elem_bytes(act), ff = c.d_ff_expert,
               fs = c.d_ff_shared_expert, d = c.d_model;
  return 4 * (c.n_experts + 4 * K) + K * (3 * ff * e + 4 * d) + 3 * fs * e + 4 * (d + 1) +
         (c.moe_beside_dense ? d * (2 * e + 4) : 0);
}

void MoeFfn::mix_addresses(Fingerprint& f) const {
  for (const DeviceBuffer* b :
       {&logits_, &experts_, &weights_, &offsets_, &slot_token_, &slot_of_, &gate_up_, &ff_, &y_,
        &sh_gate_up_, &sh_ff_, &sh_y_, &sh_g_, &in_, &route_, &out_})
    f.mix(b->get());
}

void MoeFfn::ensure(uint32_t n_tokens) {
  if (c_.n_experts == 0 || n_tokens <= tokens_) return;
  const size_t t = std::max(n_tokens, tokens_ + tokens_ / 2), e = elem_bytes(act_);
  const size_t E = c_.n_experts, K = c_.n_experts_used, ff = c_.d_ff_expert,
               fs = c_.d_ff_shared_expert, d = c_.d_model;
  logits_.reserve(t * E * 4);
  experts_.reserve(t * K * 4);
  weights_.reserve(t * K * 4);
  offsets_.reserve((E + 1) * 4);
  slot_token_.reserve(t * K * 4);
  slot_of_.reserve(t * K * 4);
  gate_up_.reserve(t * K * 2 * ff * e);
  ff_.reserve(t * K * ff * e);
  y_.reserve(t * K * d * 4);
  if (fs > 0) {
    sh_gate_up_.reserve(t * 2 * fs * e);
    sh_ff_.reserve(t * fs * e);
    sh_y_.reserve(t * d * 4);
    sh_g_.reserve(t * 4);
  }
  if (c_.moe_beside_dense) {
    in_.reserve(t * d * e);
    route_.reserve(t * d * e);
    out_.reserve(t * d * 4);
  }
  tokens_ = static_cast<uint32_t>(t);
}

size_t MoeFfn::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b :
       {&logits_, &experts_, &weights_, &offsets_, &slot_token_, &slot_of_, &gate_up_, &ff_, &y_,
        &sh_gate_up_, &sh_ff_, &sh_y_, &sh_g_, &in_, &route_, &out_})
    n += b->bytes();
  return n;
}

void MoeFfn::run(const DeviceLayer& L, const void* h, uint32_t T, float* out, Gemm& gemm,
                 cudaStream_t s, const void* router_in) {
  PITH_CHECK(T <= tokens_);
  const uint32_t E = c_.n_experts, K = c_.n_experts_used, d = c_.d_model, ff = c_.d_ff_expert;
  const size_t e = elem_bytes(act_);
  float* logits = logits_.as<float>();
  uint32_t* experts = experts_.as<uint32_t>();
  float* weights = weights_.as<float>();
  uint32_t* offsets = offsets_.as<uint32_t>();
  uint32_t* slot_token = slot_token_.as<uint32_t>();
  uint32_t* slot_of = slot_of_.as<uint32_t>();
  gemm.run(L.router, router_in ? router_in : h, T, logits, DType::F32, s);
  moe_route(logits, T, E, K, c_.moe_norm_top_k, L.expert_scale, experts, weights, s);
  moe_sort(experts, T, E, K, offsets, slot_token, slot_of, s);
  // Every expert's gate and up rows over its gathered tokens, slot by slot [T K][2 ff].
  moe_expert_gemm(L.exp_gate_up.data, act_, E, 2 * ff, d, h, act_, d, slot_token, true, offsets,
                  gate_up_.get(), act_, 2 * ff, T, K, s);
  gated_activation(gate_up_.get(), static_cast<char*>(gate_up_.get()) + size_t{ff} * e, T * K, ff,
                   2 * ff, ff_.get(), act_, c_.ffn_activation, s);
  moe_expert_gemm(L.exp_down.data, act_, E, d, ff, ff_.get(), act_, ff, slot_token, false, offsets,
                  y_.get(), DType::F32, d, T, K, s);
  moe_combine(y_.as<float>(), slot_of, weights, T, K, d, out, s);
  if (c_.d_ff_shared_expert > 0) {
    gemm.run_gated(L.sh_gate_up, h, T, sh_ff_.get(), c_.ffn_activation, sh_gate_up_.get(), s);
    gemm.run(L.sh_down, sh_ff_.get(), T, sh_y_.get(), DType::F32, s);
    gemm.run(L.sh_gate_inp, h, T, sh_g_.get(), DType::F32, s);
    moe_add_gated(sh_y_.as<float>(), sh_g_.as<float>(), T, d, out, s);
  }
}

void MoeFfn::run_beside_dense(const DeviceLayer& L, float* x, uint32_t T, float* dense, Gemm& gemm,
                              cudaStream_t s) {
  PITH_CHECK(c_.moe_beside_dense && T <= tokens_);
  const uint32_t d = c_.d_model;
  const float eps = c_.rms_eps;
  add_rmsnorm(dense, nullptr, L.post_ffn_norm1, T, d, eps, dense, DType::F32, s);
  add_rmsnorm(x, nullptr, L.pre_ffn_norm2, T, d, eps, in_.get(), act_, s);
  // The router's input, scaled after the norm in F32 as on the CPU (out_ is free until run()).
  float* route = out_.as<float>();
  add_rmsnorm(x, nullptr, L.router_scale, T, d, eps, route, DType::F32, s);
  scale_rows(route, size_t{T} * d, 1.0f / std::sqrt(static_cast<float>(d)), s);
  convert_rows(route, T, d, route_.get(), act_, s);
  run(L, in_.get(), T, out_.as<float>(), gemm, s, route_.get());
  add_rmsnorm(out_.as<float>(), nullptr, L.post_ffn_norm2, T, d, eps, out_.as<float>(), DType::F32,
              s);
  add_rows(dense, out_.get(), DType::F32, T, d, s);
}

}  // namespace pith::cuda
