// The CUDA backend's activation buffers for one forward (cuda_backend.cpp): the F32 residual
// stream and its deltas, the attention and FFN operands sized for the widest layer (gemma4's
// global layers and double-wide FFNs), and the LM head's rows, logits chunk and top-K results.
// Buffers only grow, geometrically, so a serving loop stops allocating after its largest batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/model_config.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/paged_attention.h"  // DType

namespace pith::cuda {

inline constexpr uint32_t kLmChunkRows = 64;  // LM-head rows per logits GEMM (F32 [64][vocab])

struct Workspace {
  DeviceBuffer x, delta, tmp;         // F32 [T][d]
  DeviceBuffer h, attn;               // act [T][d], [T][max q_dim]
  DeviceBuffer q, k, v;               // act [T][max q_dim], [T][max kv_dim] x2
  DeviceBuffer q_gate, gate;          // attn_output_gate: act [T][2 q_dim], [T][q_dim]
  DeviceBuffer gate_up, ff;           // act [T][2 max d_ff], [T][max d_ff]
  DeviceBuffer out_x, out_h;          // LM-head rows: F32 [R][d], act [R][d]
  DeviceBuffer logits;                // F32 [kLmChunkRows][vocab]
  DeviceBuffer topk_ids, topk_probs;  // [R][kTopKMax]
  DeviceBuffer topk_scratch;          // softmax_topk workspace for one chunk
  uint32_t tokens = 0, lm_rows = 0;

  // Bytes per batch token, per LM-head row, and independent of both (the startup budget).
  static size_t token_bytes(const ModelConfig& c, DType act);
  static size_t lm_row_bytes(const ModelConfig& c, DType act);
  static size_t fixed_bytes(const ModelConfig& c);

  // Grows to at least n_tokens rows and n_lm_rows LM-head rows.
  void ensure(const ModelConfig& c, DType act, uint32_t n_tokens, uint32_t n_lm_rows);
  size_t bytes() const;
};

}  // namespace pith::cuda
