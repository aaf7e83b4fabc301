// The CUDA backend's side of hybrid models (qwen3.5): the recurrent state pool in device memory
// (the twin of engine/state_pool.h, same slot layout and budget rule) and the Gated DeltaNet
// token mixer of one layer (the twin of engine/gated_delta_net.h):
//   qkv = W_qkv h, z = W_z h, b = W_b h, a = W_a h              cuBLASLt (DType outputs)
//   mixed = silu(causal_conv(qkv)), windows advanced             causal_conv_silu (F32 out)
//   q, k heads L2-normed; beta = sigmoid(b); g = softplus(a + dt_bias) * A
//   o = the recurrent delta rule per (sequence, value head)      delta_rule (state in the pool)
//   o = rmsnorm(o per head) * w_norm * silu(z); delta = W_out o  rmsnorm_rows, gated_activation
// Decode steps take the recurrent form of the delta rule (one warp per state row, the row in
// registers), forwards with a multi-token sequence its chunked form (docs/gpu.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/model_config.h"
#include "backend/slot_pool.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"

namespace pith::cuda {

struct Fingerprint;  // decode_graphs.h

class DeviceStatePool {
 public:
  // state_slots_in_budget(config, memory_bytes) slots (none without recurrent layers), and one
  // more past them: the padding rows of decode graph steps advance it (cleared here, on
  // `stream`); the control layer never sees it.
  DeviceStatePool(const ModelConfig& config, size_t memory_bytes, cudaStream_t stream);
  // The device bytes such a pool takes (for the startup budget, before allocating).
  static size_t bytes_for(const ModelConfig& config, size_t memory_bytes);

  SlotPool& slots() { return *slots_; }
  uint32_t pad_slot() const { return slots_->capacity(); }
  size_t slot_floats() const { return slot_floats_; }
  size_t slot_bytes() const { return slot_floats_ * sizeof(float); }
  size_t layer_floats() const { return layer_floats_; }
  size_t bytes() const { return memory_.bytes(); }
  float* data() { return memory_.as<float>(); }

  // Stream-ordered like the forwards: clear zeroes slots, copy forks one; save/load move images
  // of slot_bytes() each through host memory and return when the copy is done.
  void clear(std::span<const uint32_t> slots, cudaStream_t stream);
  void copy(uint32_t src, uint32_t dst, cudaStream_t stream);
  void save(std::span<const uint32_t> slots, std::span<std::byte> out, cudaStream_t stream);
  void load(std::span<const uint32_t> slots, std::span<const std::byte> in, cudaStream_t stream);

 private:
  size_t layer_floats_ = 0, slot_floats_ = 0;
  std::unique_ptr<SlotPool> slots_;
  DeviceBuffer memory_;
};

class DeltaNetMixer {
 public:
  DeltaNetMixer(const ModelConfig& config, DType act);
  // Workspace bytes per batch token (what ensure() allocates per token).
  static size_t token_bytes(const ModelConfig& config, DType act);
  void ensure(uint32_t n_tokens);
  size_t bytes() const;

  // Once per forward: the batch's sequences as device arrays [n] (first input row, inputs,
  // state slot), from the backend's staging.
  void set_sequences(const uint32_t* first, const uint32_t* count, const uint32_t* slot, uint32_t n,
                     DeviceStatePool& pool);
  // Every device address and by-value argument run() launches with beyond its inputs (the
  // workspace moves when ensure() grows it), for launch fingerprints.
  void mix_addresses(Fingerprint& f) const;

  // delta (F32 [T][d_model]) = the mixer of recurrent layer number `recurrent_index` over h
  // (act [T][d_model]), advancing every sequence's state.
  void run(const DeviceLayer& layer, uint32_t recurrent_index, const void* h, uint32_t T,
           float* delta, Gemm& gemm, cudaStream_t stream);

 private:
  const ModelConfig& c_;
  DType act_;
  uint32_t tokens_ = 0;
  DeviceBuffer qkv_, z_, b_, a_, o_;  // act: [T][C], [T][value_dim], [T][Hv] x2, [T][value_dim]
  DeviceBuffer mixed_, beta_, g_;     // F32: [T][C], [T][Hv] x2
  // The chunked delta rule's prep results (F32): [T][Hv], [T][Hv][kDeltaChunk] x2.
  DeviceBuffer chunk_g_, chunk_qk_, chunk_tinv_;
  const uint32_t *first_ = nullptr, *count_ = nullptr, *slot_ = nullptr;
  uint32_t n_seqs_ = 0;
  DeviceStatePool* pool_ = nullptr;
};

}  // namespace pith::cuda
