// The mixture-of-experts feed-forward of one layer (qwen2moe, qwen3moe, qwen35moe, gemma4
// 26B-A4B, gpt-oss) on the CPU. Experts use the family's gated activation (SwiGLU; GELU-tanh for
// gemma4, whose router also reads its own input and whose experts scale their outputs; the
// clamped SwiGLU for gpt-oss, whose router and experts add biases).
//
// Per token: router logits W_r h, softmax over all experts, the n_experts_used most probable
// (ties: lower index), their probabilities renormalised to sum 1 where the family does. Then per
// expert, in index order, the tokens routed to it are gathered into one [n][d] block and run
// through its SwiGLU (three matmuls), and each token's output accumulates weight * result. A
// decode step thus reads only the routed experts' weights. The shared expert, where present,
// runs densely over all tokens, scaled per token by sigmoid(w . h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "engine/model_weights.h"

namespace pith {

// Reusable buffers, so steady-state calls do not allocate.
struct MoeScratch {
  std::vector<float> router;                                    // [T][n_experts]
  std::vector<std::vector<std::pair<uint32_t, float>>> routed;  // [expert]: (token, weight)
  std::vector<float> x, gate, up, y;                            // gathered block of one expert
  std::vector<std::pair<float, uint32_t>> order;                // one token's (prob, expert)
};

// out[t] = MoE FFN of h[t] for t < T (h and out are [T][d_model]; out is overwritten). The
// router reads router_in ([T][d_model]) where given, else h.
void moe_ffn(ThreadPool& pool, const ModelConfig& config, const LayerWeights& layer, const float* h,
             size_t T, float* out, MoeScratch& scratch, const float* router_in = nullptr);

}  // namespace pith
