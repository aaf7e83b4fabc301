// Host launchers of the CUDA backend's small kernels: embedding and Embed-slot row moves, the
// fused residual add + RMSNorm, RoPE, KV append/copy into the paged pool, the gated FFN
// activations, row adds and conversions, the families' small steps (bias rows, per-head norms,
// scaling, soft-capping), and the LM-head reduction (softmax normaliser + top-K next-token
// distribution).
//
// Every launcher only enqueues work on `stream` (no synchronisation, no host copies) and takes
// device pointers. Shapes are row-major; `n` is a row count, `d` a row length in elements.
// DType is the activation/KV element type (F32 mode or BF16 mode, see docs/gpu.md); the
// hidden/residual stream is always F32. The kernel bodies live in kernels/*_body.h as
// __host__ __device__ functions so the unit tests run them on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/model_config.h"         // FfnActivation
#include "engine/cuda/paged_attention.h"  // DType, KvPoolLayout

namespace pith::cuda {

namespace kern {
struct KvGeometry;      // kernels/kv_body.h
struct DeltaSequences;  // kernels/delta_net_body.h
struct DeltaRuleParams;
struct DeltaChunkScratch;  // kernels/delta_chunked_body.h
}  // namespace kern

// out[i][:] = table row tokens[i] (table of F32 or BF16 on the device) as F32.
void embed_rows(const void* table, DType table_type, const int32_t* tokens, uint32_t n, uint32_t d,
                float* out, cudaStream_t stream);

// dst[i][:] = src[idx[i]][:] (F32 rows) and the reverse scatter dst[idx[i]][:] = src[i][:]:
// Embed slots in and out of the hidden stream.
void gather_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                 cudaStream_t stream);
void scatter_rows(const float* src, const uint32_t* idx, uint32_t n, uint32_t d, float* dst,
                  cudaStream_t stream);

// residual += delta (delta may be null), then out = rmsnorm(residual) * weight (F32 weight),
// written as `out_type`. One block per row.
void add_rmsnorm(float* residual, const float* delta, const float* weight, uint32_t n, uint32_t d,
                 float eps, void* out, DType out_type, cudaStream_t stream);

// In place on x [n][n_rows][d] (DType): every row of d elements RMS-normalised and multiplied
// by weight [d] (F32; null: a weightless norm). The per-head Q/K norms: rows = heads.
void rmsnorm_rows(void* x, DType type, uint32_t n, uint32_t d, const float* weight, float eps,
                  cudaStream_t stream);

// In place on x [n][n_heads][head_dim] (DType): rotates the first n_pairs pairs of each head by
// cos/sin [n][n_pairs] (the backend's RopeTable::angles per token); pair i is (2i, 2i+1), or
// (i, i + n_pairs) with split_half (RopeStyle::SplitHalf).
void rope(void* x, DType type, uint32_t n, uint32_t n_heads, uint32_t head_dim, uint32_t n_pairs,
          bool split_half, const float* cos, const float* sin, cudaStream_t stream);

// The q, k and v rows of a layer's projections: separate matrices (ld = their widths) or the
// sections of one fused QKV output (ld = its width for all three).
struct QkvRows {
  const void* q = nullptr;
  uint32_t q_ld = 0;
  const void* k = nullptr;
  uint32_t k_ld = 0;
  const void* v = nullptr;
  uint32_t v_ld = 0;
};

// rope(q), rope(k) and kv_append(k, v) of one layer in one launch (kernels/rope_append_body.h):
// q rotated into q_dst [n][n_heads][head_dim] (in place when it is src.q), k rotated into the
// pool (its rows are left unrotated), v copied. n_kv * head_dim must be the layer's kv_dim in
// `layout`.
void rope_append(const QkvRows& src, void* q_dst, DType type, uint32_t n, uint32_t n_heads,
                 uint32_t n_kv, uint32_t head_dim, uint32_t n_pairs, bool split_half,
                 const float* cos, const float* sin, const uint32_t* pages, const uint32_t* slots,
                 uint32_t layer, const KvPoolLayout& layout, void* pool, cudaStream_t stream);

// The strides of the run of `count` layers from `first` (all of one shape) in the pool.
kern::KvGeometry kv_run_geometry(const KvPoolLayout& layout, uint32_t first, uint32_t count);

// Writes k and v rows [n][kv_dim] (layout.dtype) into the pool at (pages[i], slots[i]) of
// `layer`.
void kv_append(const void* k, const void* v, uint32_t n, const uint32_t* pages,
               const uint32_t* slots, uint32_t layer, const KvPoolLayout& layout, void* pool,
               cudaStream_t stream);

// n slots of every layer's K and V from (src_page, src_slot) to (dst_page, dst_slot); memmove
// semantics when the ranges overlap on one page.
void kv_copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n,
             const KvPoolLayout& layout, void* pool, cudaStream_t stream);

// out[i][j] = act(gate[i][j]) * up[i][j], act = SiLU (SwiGLU) or GELU-tanh; gate/up rows have
// leading dimension ld (elements), out is [n][ff] dense. DType in and out.
void gated_activation(const void* gate, const void* up, uint32_t n, uint32_t ff, uint32_t ld,
                      void* out, DType type, FfnActivation act, cudaStream_t stream);

// x[i][j] += bias[j] (x DType [n][d], bias F32 [d]): Q/K/V projection biases.
void add_bias(void* x, DType type, const float* bias, uint32_t n, uint32_t d, cudaStream_t stream);

// x[i] *= s over `total` F32 elements (scaled embeddings).
void scale_rows(float* x, size_t total, float s, cudaStream_t stream);

// x[i] = softcap * tanh(x[i] / softcap) over `total` F32 elements (final logit soft-cap).
void soft_cap(float* x, size_t total, float softcap, cudaStream_t stream);

// residual (F32) += x (DType): the attention/FFN output projections' add when not fused.
void add_rows(float* residual, const void* x, DType type, uint32_t n, uint32_t d,
              cudaStream_t stream);

// Converts F32 rows to DType (e.g. the final hidden state for the LM-head GEMM).
void convert_rows(const float* src, uint32_t n, uint32_t d, void* dst, DType type,
                  cudaStream_t stream);

// LoRA deltas (engine/cuda/lora.h): dst[i][:] = src[idx[i]][:] (rows of d elements of `type`),
// and y[idx[i]][col0 + j] += scale * v[i][j] (v F32 [n][d], y rows of ldy elements of y_type).
void lora_gather_rows(const void* src, DType type, const uint32_t* idx, uint32_t n, uint32_t d,
                      void* dst, cudaStream_t stream);
void lora_add_rows(const float* v, const uint32_t* idx, uint32_t n, uint32_t d, float scale,
                   void* y, DType y_type, uint32_t ldy, uint32_t col0, cudaStream_t stream);
// Gated DeltaNet layers (kernels/delta_net_body.h; the CPU's engine/gated_delta_net.h). The
// causal convolution + SiLU of every sequence's inputs x [T][C] (DType; T = n_rows, the sum of
// the counts) into out [T][C] (F32), advancing each sequence's conv window in the state pool
// (a thread per row and channel when some sequence has several rows, then the windows); the
// in-place L2 norms of the first `heads` head rows of dk floats of each of the n rows of C; beta =
// sigmoid(b) and g = softplus(a + dt_bias) * A over [n][Hv]; the recurrent delta rule over each
// sequence's state matrices (one block per sequence, value head and 4 value rows), out in
// `out_type`.
void causal_conv_silu(const kern::DeltaSequences& seqs, const float* weight_t, const void* x,
                      DType type, float* out, uint32_t n_rows, uint32_t C, uint32_t K,
                      cudaStream_t stream);
void l2norm_heads(float* mixed, uint32_t n, uint32_t C, uint32_t heads, uint32_t dk, float eps,
                  cudaStream_t stream);
void delta_gates(const void* b, const void* a, DType type, const float* dt_bias, const float* A,
                 uint32_t n, uint32_t Hv, float* beta, float* g, cudaStream_t stream);
void delta_rule(const kern::DeltaRuleParams& p, DType out_type, cudaStream_t stream);
// The same result in the chunked form (kernels/delta_chunked_body.h), for forwards where some
// sequence has several inputs: a prep pass over every chunk of every sequence (blocks for
// max_chunks chunks per sequence; scratch of [T][Hv] and two [T][Hv][kDeltaChunk] floats), then
// the state pass (one block per sequence, value head and kChunkRows value rows).
void delta_rule_chunked(const kern::DeltaRuleParams& p, const kern::DeltaChunkScratch& scratch,
                        uint32_t max_chunks, DType out_type, cudaStream_t stream);

// Mixture of experts (kernels/moe_body.h), routed on the device: softmax + top-K of the router
// logits [T][E] (F32, overwritten with the probabilities) into experts/weights [T][K] (weights
// renormalised when norm_top_k, times expert_scale[e] when given); the choices grouped by
// expert (offsets [E + 1], slot_token [T K], slot_of [T K]); y[slot] = W_e
// x(slot) for every expert in one launch (w stacked [E][rows][cols]; x(slot) = x row
// slot_token[slot] when gather, else row slot; W and x of one type, y that type or F32);
// out[t] = sum_k weights[t][k] y[slot_of[t][k]] (F32 [T][d]); out[t] += sigmoid(g[t]) ysh[t].
// moe_expert_gemm's n_tokens (the step's T) bounds any expert's slots: at most 8 with BF16
// weights takes the GEMV (kernels/gemv_body.h), over the T k_used slots; more, tensor cores
// (kernels/moe_mma_body.h), unless set_moe_tensor_cores(false) (timing A/B: the CUDA-core tiles
// of the F32 weights then run BF16 too).
void moe_route(float* logits, uint32_t T, uint32_t E, uint32_t K, bool norm_top_k,
               const float* expert_scale, uint32_t* experts, float* weights, cudaStream_t stream);
void moe_sort(const uint32_t* experts, uint32_t T, uint32_t E, uint32_t K, uint32_t* offsets,
              uint32_t* slot_token, uint32_t* slot_of, cudaStream_t stream);
void moe_expert_gemm(const void* w, DType w_type, uint32_t E, uint32_t rows, uint32_t cols,
                     const void* x, DType x_type, size_t ld_x, const uint32_t* slot_token,
                     bool gather, const uint32_t* offsets, void* y, DType y_type, size_t ld_y,
                     uint32_t n_tokens, uint32_t k_used, cudaStream_t stream);
void set_moe_tensor_cores(bool on);
void moe_combine(const float* y, const uint32_t* slot_of, const float* weights, uint32_t T,
                 uint32_t K, uint32_t d, float* out, cudaStream_t stream);
void moe_add_gated(const float* ysh, const float* g, uint32_t T, uint32_t d, float* out,
                   cudaStream_t stream);

// The hybrid models' gated attention: src [n_rows][2 hd] (per head: query, then gate) split into
// q and gate [n_rows][hd]; x[i] *= sigmoid(gate[i]) after attention. DType throughout.
void split_query_gate(const void* src, DType type, uint32_t n_rows, uint32_t hd, void* q,
                      void* gate, cudaStream_t stream);
void sigmoid_gate(void* x, const void* gate, DType type, size_t total, cudaStream_t stream);

// The skinny BF16 GEMM (kernels/gemv_body.h): y[t][o] = sum_c w[o][c] x[t][c] for t < n, o <
// rows; w BF16 [rows][cols], x BF16 [n][cols], y of y_type (F32 or BF16) [n][ldy]. Only where
// gemv_bf16_fits (n <= 8, cols % 8 == 0, w and x 16-byte aligned); Gemm decides when.
bool gemv_bf16_fits(uint32_t n, uint32_t cols, const void* w, const void* x);
void gemv_bf16(const void* w, uint32_t rows, uint32_t cols, const void* x, uint32_t n, void* y,
               DType y_type, size_t ldy, cudaStream_t stream);
// The gate/up GEMV with the gated activation as its epilogue: w BF16 [2 ff][cols] (gate rows,
// then up rows), out [n][ff] of out_type = act(gate) * up, gate and up rounded to out_type
// first (the bits of the GEMV into [n][2 ff] followed by gated_activation).
void gemv_gated_bf16(const void* w, uint32_t ff, uint32_t cols, const void* x, uint32_t n,
                     void* out, DType out_type, FfnActivation act, cudaStream_t stream);

// Logit adjustments (forward_batch.h LogitAdjustment, in place, before softmax_topk): row r of
// logits [rows][vocab] gets adjust_at[2r + 1] adjustments, 16-byte LogitAdjustment entries at
// word adjust_at[2r] of `tail` (a count of 0: none).
void adjust_logits(float* logits, uint32_t rows, uint32_t vocab, const uint32_t* adjust_at,
                   const uint32_t* tail, cudaStream_t stream);

// LM-head reduction over logits [rows][vocab] (F32): per row the softmax max and sum over the
// full vocabulary and the top-k (ties by lower id), probabilities = exp(l - max) / sum.
// Writes out_ids [rows][k_max] and out_probs [rows][k_max]: row r writes its first
// min(ks[r], vocab) entries, best first (ks: device array [rows], each <= k_max).
// k_max <= kTopKMax. `workspace` (device) of topk_workspace_bytes(rows, vocab, k_max) bytes,
// which also covers every call with fewer rows or a smaller k_max (size it once).
// Token masks (forward_batch.h TokenMask, as 32-bit words; null mask_at: none): row r with
// mask_at[r] != kNoTokenMask keeps only tokens whose bit is set in the mask at
// masks + mask_at[r]; when fewer than its k are, the rest of its entries are id -1, prob 0.
inline constexpr uint32_t kTopKMax = 1024;
inline constexpr uint32_t kNoTokenMask = 0xFFFFFFFFu;
size_t topk_workspace_bytes(uint32_t rows, uint32_t vocab, uint32_t k_max);
void softmax_topk(const float* logits, uint32_t rows, uint32_t vocab, const uint32_t* ks,
                  uint32_t k_max, void* workspace, int32_t* out_ids, float* out_probs,
                  cudaStream_t stream, const uint32_t* mask_at = nullptr,
                  const uint32_t* masks = nullptr);

}  // namespace pith::cuda
