// Recurrent state pool and Gated DeltaNet mixer on the device. See recurrent_layers.h.
#include "engine/cuda/recurrent_layers.h"

#include <algorithm>

#include "common/error.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/delta_chunked_body.h"
#include "engine/cuda/kernels/delta_net_body.h"
#include "engine/state_pool.h"

namespace pith::cuda {

DeviceStatePool::DeviceStatePool(const ModelConfig& c, size_t memory_bytes, cudaStream_t stream)
    : layer_floats_(c.delta_net.layer_state_floats()),
      slot_floats_(c.recurrent_state_floats()),
      slots_(
          std::make_unique<SlotPool>(state_slots_in_budget(c, memory_bytes), "recurrent states")) {
  if (slots_->capacity() == 0) return;
  memory_.reserve((size_t{slots_->capacity()} + 1) * slot_bytes());
  const uint32_t pad = pad_slot();
  clear(std::span<const uint32_t>(&pad, 1), stream);
}

size_t DeviceStatePool::bytes_for(const ModelConfig& c, size_t memory_bytes) {
  const uint32_t n = state_slots_in_budget(c, memory_bytes);
  return n == 0 ? 0 : (size_t{n} + 1) * c.recurrent_state_floats() * sizeof(float);
}

void DeviceStatePool::clear(std::span<const uint32_t> slots, cudaStream_t stream) {
  for (uint32_t id : slots)
    PITH_CUDA_CHECK(cudaMemsetAsync(data() + id * slot_floats_, 0, slot_bytes(), stream));
}

void DeviceStatePool::copy(uint32_t src, uint32_t dst, cudaStream_t stream) {
  if (src == dst) return;
  PITH_CUDA_CHECK(cudaMemcpyAsync(data() + dst * slot_floats_, data() + src * slot_floats_,
                                  slot_bytes(), cudaMemcpyDeviceToDevice, stream));
}

void DeviceStatePool::save(std::span<const uint32_t> slots, std::span<std::byte> out,
                           cudaStream_t stream) {
  for (size_t i = 0; i < slots.size(); ++i)
    PITH_CUDA_CHECK(cudaMemcpyAsync(out.data() + i * slot_bytes(), data() + slots[i] * slot_floats_,
                                    slot_bytes(), cudaMemcpyDeviceToHost, stream));
  PITH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void DeviceStatePool::load(std::span<const uint32_t> slots, std::span<const std::byte> in,
                           cudaStream_t stream) {
  for (size_t i = 0; i < slots.size(); ++i)
    PITH_CUDA_CHECK(cudaMemcpyAsync(data() + slots[i] * slot_floats_, in.data() + i * slot_bytes(),
                                    slot_bytes(), cudaMemcpyHostToDevice, stream));
  PITH_CUDA_CHECK(cudaStreamSynchronize(stream));  // `in` is released by the caller
}

DeltaNetMixer::DeltaNetMixer(const ModelConfig& c, DType act) : c_(c), act_(act) {}

size_t DeltaNetMixer::token_bytes(const ModelConfig& c, DType act) {
  if (!c.hybrid()) return 0;
  const DeltaNetConfig& dn = c.delta_net;
  const size_t C = dn.conv_channels(), vd = dn.value_dim(), Hv = dn.v_heads;
  return elem_bytes(act) * (C + 2 * vd) +
         sizeof(float) * (C + 4 * Hv + Hv * (1 + 2 * size_t{kern::kDeltaChunk}));
}

void DeltaNetMixer::ensure(uint32_t n_tokens) {
  if (!c_.hybrid() || n_tokens <= tokens_) return;
  const size_t t = std::max(n_tokens, tokens_ + tokens_ / 2), e = elem_bytes(act_);
  const DeltaNetConfig& dn = c_.delta_net;
  const size_t C = dn.conv_channels(), vd = dn.value_dim(), Hv = dn.v_heads;
  qkv_.reserve(t * C * e);
  z_.reserve(t * vd * e);
  o_.reserve(t * vd * e);
  b_.reserve(t * Hv * 4);  // F32 (below)
  a_.reserve(t * Hv * 4);
  mixed_.reserve(t * C * 4);
  beta_.reserve(t * Hv * 4);
  g_.reserve(t * Hv * 4);
  chunk_g_.reserve(t * Hv * 4);
  chunk_qk_.reserve(t * Hv * kern::kDeltaChunk * 4);
  chunk_tinv_.reserve(t * Hv * kern::kDeltaChunk * 4);
  tokens_ = static_cast<uint32_t>(t);
}

size_t DeltaNetMixer::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b :
       {&qkv_, &z_, &b_, &a_, &o_, &mixed_, &beta_, &g_, &chunk_g_, &chunk_qk_, &chunk_tinv_})
    n += b->bytes();
  return n;
}

void DeltaNetMixer::set_sequences(const uint32_t* first, const uint32_t* count,
                                  const uint32_t* slot, uint32_t n, DeviceStatePool& pool) {
  first_ = first;
  count_ = count;
  slot_ = slot;
  n_seqs_ = n;
  pool_ = &pool;
}

void DeltaNetMixer::mix_addresses(Fingerprint& f) const {
  for (const DeviceBuffer* b :
       {&qkv_, &z_, &b_, &a_, &o_, &mixed_, &beta_, &g_, &chunk_g_, &chunk_qk_, &chunk_tinv_})
    f.mix(b->get());
  f.mix(first_);
  f.mix(count_);
  f.mix(slot_);
  f.mix(uint64_t{n_seqs_});
  f.mix(pool_ ? static_cast<const void*>(pool_->data()) : nullptr);
}

void DeltaNetMixer::run(const DeviceLayer& L, uint32_t r, const void* h, uint32_t T, float* delta,
                        Gemm& gemm, cudaStream_t s) {
  PITH_CHECK(pool_ != nullptr && T <= tokens_);
  const DeltaNetConfig& dn = c_.delta_net;
  const uint32_t C = dn.conv_channels(), key_dim = dn.key_dim(), vd = dn.value_dim();
  gemm.run(L.ssm_qkv, h, T, qkv_.get(), act_, s);
  gemm.run(L.ssm_gate, h, T, z_.get(), act_, s);
  // The gates' inputs stay F32, as on the CPU: a's error would compound through every decay
  // of the state (and they are only Hv columns).
  gemm.run(L.ssm_beta, h, T, b_.get(), DType::F32, s);
  gemm.run(L.ssm_alpha, h, T, a_.get(), DType::F32, s);

  kern::DeltaSequences seqs;
  seqs.first = first_;
  seqs.count = count_;
  seqs.slot = slot_;
  seqs.n_seqs = n_seqs_;
  seqs.states = pool_->data();
  seqs.slot_floats = pool_->slot_floats();
  seqs.layer_offset = size_t{r} * pool_->layer_floats();
  float* mixed = mixed_.as<float>();
  causal_conv_silu(seqs, L.ssm_conv_t, qkv_.get(), act_, mixed, T, C, dn.conv_kernel, s);
  l2norm_heads(mixed, T, C, 2 * dn.k_heads, dn.k_dim, c_.rms_eps, s);
  delta_gates(b_.get(), a_.get(), DType::F32, L.ssm_dt_bias, L.ssm_a, T, dn.v_heads,
              beta_.as<float>(), g_.as<float>(), s);

  kern::DeltaRuleParams p;
  p.seqs = seqs;
  p.conv_floats = dn.conv_floats();
  p.mixed = mixed;
  p.beta = beta_.as<float>();
  p.g = g_.as<float>();
  p.out = o_.get();
  p.C = C;
  p.key_dim = key_dim;
  p.Hv = dn.v_heads;
  p.k_heads = dn.k_heads;
  p.dk = dn.k_dim;
  p.dv = dn.v_dim;
  if (T > n_seqs_) {
    // Some sequence has several inputs (a prefill, or a prompt chunk beside decodes): the
    // chunked form; a batch of single decode steps keeps the recurrent kernel.
    const kern::DeltaChunkScratch x{chunk_g_.as<float>(), chunk_qk_.as<float>(),
                                    chunk_tinv_.as<float>()};
    delta_rule_chunked(p, x, (T + kern::kDeltaChunk - 1) / kern::kDeltaChunk, act_, s);
  } else {
    delta_rule(p, act_, s);
  }

  // Gated output norm per value head, then the output projection.
  rmsnorm_rows(o_.get(), act_, T * dn.v_heads, dn.v_dim, L.ssm_norm, c_.rms_eps, s);
  gated_activation(z_.get(), o_.get(), T, vd, vd, o_.get(), act_, FfnActivation::Silu, s);
  gemm.run(L.ssm_out, o_.get(), T, delta, DType::F32, s);
}

}  // namespace pith::cuda
