// Host launchers of the CUDA backend's small kernels: embedding and Embed-slot row moves, the
// fused residual add + RMSNorm, RoPE, KV append/copy into the paged pool, SwiGLU, row adds and
// conversions, and the LM-head reduction (softmax normaliser + top-K next-token distribution).
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

#include "engine/cuda/paged_attention.h"  // DType, KvPoolLayout

namespace pith::cuda {

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

// In place on x [n][n_heads][head_dim] (DType): rotates adjacent pairs (2i, 2i+1) of each head
// by cos/sin [n][head_dim/2] (the backend's RopeTable::angles per token).
void rope(void* x, DType type, uint32_t n, uint32_t n_heads, uint32_t head_dim, const float* cos,
          const float* sin, cudaStream_t stream);

// Writes k and v rows [n][kv_dim] (layout.dtype) into the pool at (pages[i], slots[i]) of
// `layer`.
void kv_append(const void* k, const void* v, uint32_t n, const uint32_t* pages,
               const uint32_t* slots, uint32_t layer, const KvPoolLayout& layout, void* pool,
               cudaStream_t stream);

// n slots of every layer's K and V from (src_page, src_slot) to (dst_page, dst_slot); memmove
// semantics when the ranges overlap on one page.
void kv_copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n,
             const KvPoolLayout& layout, void* pool, cudaStream_t stream);

// out[i][j] = silu(gate[i][j]) * up[i][j]; gate/up rows have leading dimension ld (elements),
// out is [n][ff] dense. DType in and out.
void swiglu(const void* gate, const void* up, uint32_t n, uint32_t ff, uint32_t ld, void* out,
            DType type, cudaStream_t stream);

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
// LM-head reduction over logits [rows][vocab] (F32): per row the softmax max and sum over the
// full vocabulary and the top-k (ties by lower id), probabilities = exp(l - max) / sum.
// Writes out_ids [rows][k_max] and out_probs [rows][k_max]: row r writes its first
// min(ks[r], vocab) entries, best first (ks: device array [rows], each <= k_max).
// k_max <= kTopKMax. `workspace` (device) of topk_workspace_bytes(rows, vocab, k_max) bytes,
// which also covers every call with fewer rows or a smaller k_max (size it once).
inline constexpr uint32_t kTopKMax = 1024;
size_t topk_workspace_bytes(uint32_t rows, uint32_t vocab, uint32_t k_max);
void softmax_topk(const float* logits, uint32_t rows, uint32_t vocab, const uint32_t* ks,
                  uint32_t k_max, void* workspace, int32_t* out_ids, float* out_probs,
                  cudaStream_t stream);

}  // namespace pith::cuda
