// The token mixer of a Gated DeltaNet layer (Qwen3.5's linear attention) over a batch on the
// CPU, in place of softmax attention: no KV pages, a fixed-size recurrent state per sequence.
//
// For the T inputs of the batch (h: the normed residual stream):
//   qkv = W_qkv h, z = W_z h, b = W_b h, a = W_a h                 (batched matmuls)
//   per sequence, in token order: qkv <- silu(causal_conv(qkv)) with the state's conv window
//   q, k <- L2-normed per key head; beta = sigmoid(b); g = softplus(a + dt_bias) * A
//   per (sequence, value head): the gated delta rule over the state matrix (delta_rule.h;
//   chunked when the sequence brings several tokens, recurrent for decode steps)
//   o <- rmsnorm(o per head) * w_norm * silu(z);  out = W_out o
// Value head h reads key head h % k_heads (HF checkpoints are put in that order at load).
//
// A sequence's state (one per sequence and recurrent layer, in the engine's state pool) is
// [conv window: (kernel-1) x conv_channels][state matrices: v_heads x v_dim x k_dim] floats,
// zero when the sequence starts; the mixer advances it over the sequence's inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "engine/delta_rule.h"
#include "engine/model_weights.h"

namespace pith {

struct DeltaNetSequence {
  uint32_t first = 0;      // first input of the sequence in the batch
  uint32_t n = 0;          // its inputs (consecutive tokens of the sequence)
  float* state = nullptr;  // this layer's block of the sequence's state slot
};

// Reusable buffers, so steady-state calls do not allocate.
struct DeltaNetScratch {
  std::vector<float> qkv, mixed, z, beta, gate, out;  // [T][...]
  std::vector<DeltaRuleScratch> workers;
};

// out[t] = the layer's mixer output for h[t] (h and out are [T][d_model]; out is overwritten).
void gated_delta_net(ThreadPool& pool, const ModelConfig& config, const LayerWeights& layer,
                     const float* h, size_t T, std::span<const DeltaNetSequence> seqs,
                     DeltaNetScratch& scratch, float* out);

}  // namespace pith
