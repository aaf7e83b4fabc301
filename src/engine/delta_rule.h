// The kernels of a Gated DeltaNet layer (Qwen3.5's linear attention) for one sequence: the
// short causal convolution with its carried window, and the gated delta rule over the
// per-head state matrix, in its recurrent (token by token) and chunked (parallel) forms.
//
// The delta rule, per value head with state S ([v_dim][k_dim], row j = value dimension j),
// for each token with query q, key k (both L2-normed), value v, log-decay g <= 0 and
// write strength beta in (0, 1):
//   S <- exp(g) S;   u = beta (v - S k);   S <- S + u k^T;   o = S q / sqrt(k_dim)
// (llama.cpp's ggml_gated_delta_net and transformers' torch_recurrent_gated_delta_rule, with
// the state stored transposed as llama.cpp does, so both products read contiguous rows).
//
// The chunked form computes the same thing for L tokens at once. With G_i the running sum of
// g inside the chunk and S_0 the state before it, the writes u satisfy
//   u_i = beta_i (v_i - exp(G_i) S_0 k_i - sum_{s<i} exp(G_i - G_s) (k_s . k_i) u_s),
// a unit lower-triangular system solved by forward substitution; then
//   o_i = exp(G_i) S_0 q_i + sum_{s<=i} exp(G_i - G_s) (k_s . q_i) u_s
//   S_L = exp(G_{L-1}) S_0 + sum_s exp(G_{L-1} - G_s) u_s k_s^T.
// It touches the state three times per chunk instead of once per token and its inner loops
// are dot products over the chunk's keys held in L1, which is what makes prefill fast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pith {

// The per-token inputs of one head, as rows of the layer's activations: token t's query is
// q + t * q_stride, and so on. g and beta are per token (stride g_stride).
struct DeltaRuleInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  size_t q_stride = 0, k_stride = 0, v_stride = 0, g_stride = 0;
  float* out = nullptr;  // token t's output: out + t * out_stride, v_dim floats
  size_t out_stride = 0;
};

// Tokens per chunk of the chunked form (the size of the triangular system).
inline constexpr uint32_t kDeltaRuleChunk = 64;

// Reusable buffers of delta_rule_chunked (one per worker).
struct DeltaRuleScratch {
  std::vector<float> cum_g;        // [chunk]
  std::vector<float> kk;           // [chunk][chunk] key . key
  std::vector<float> qk;           // [chunk][chunk] query . key
  std::vector<float> u;            // [chunk][v_dim] writes
  std::vector<float> s_q;          // [chunk][v_dim] S_0 q
  std::vector<float> coef;         // [chunk] per-token factors of the state update
  std::vector<const float*> rows;  // [v_dim] the state rows
};

// Advances S ([v_dim][k_dim]) over n tokens one at a time: one pass over S per token.
void delta_rule_recurrent(float* state, const DeltaRuleInputs& in, uint32_t n, uint32_t k_dim,
                          uint32_t v_dim);

// The same result (to f32 rounding) in chunks of kDeltaRuleChunk tokens.
void delta_rule_chunked(float* state, const DeltaRuleInputs& in, uint32_t n, uint32_t k_dim,
                        uint32_t v_dim, DeltaRuleScratch& scratch);

// Causal depthwise convolution with kernel width `kernel`, then SiLU, over `channels` channels:
//   out[t][c] = silu(sum_{i<kernel} weight_t[i][c] * x[t - (kernel-1) + i][c])
// where inputs before t = 0 come from `window` ([kernel-1] rows, oldest first), which is then
// replaced by the last kernel-1 inputs. The weights are stored transposed ([kernel] rows), so
// every loop runs along channels; weight and window rows are `stride` floats apart, x and out
// rows x_stride / out_stride (a block of channels is a pointer offset into all four; x and out
// may not alias).
void causal_conv_silu(const float* weight_t, float* window, size_t stride, const float* x,
                      size_t x_stride, float* out, size_t out_stride, uint32_t n, uint32_t channels,
                      uint32_t kernel);

// x[i] / sqrt(sum x^2 + eps): the L2 normalisation of queries and keys (llama.cpp's
// rms_norm(x, eps/n)/sqrt(n), transformers' l2norm), in place.
void l2_normalize(float* x, uint32_t n, float eps);

}  // namespace pith
