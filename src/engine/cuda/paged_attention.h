// Paged attention of one forward batch on the device: mixed prefill and decode rows, causal or
// custom (BRLE) masks, GQA/MQA, over the KV pool laid out as KvPoolLayout says.
//
// plan() once per forward turns the sequences into index arrays and packed mask bits on the
// host (attention/attention_plan.h) and uploads them; run() per layer launches the kernels:
// FlashInfer's paged prefill/decode templates for BF16 when built with them (PITH_FLASHINFER),
// else the project's own kernel (attention/paged_attention_kernel.cuh), which is also the F32
// path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/cuda/attention/paged_kv.h"

namespace pith::cuda {

// The context a CUDA graph's split count is chosen for: the longest context of the step rounded
// up to a power of two, at least 256 slots (two chunks of the own kernel).
inline uint32_t graph_context_class(uint32_t max_kv_len) {
  uint32_t c = 256;
  while (c < max_kv_len && c < (1u << 31)) c <<= 1;
  return c;
}

class PagedAttention {
 public:
  // allow_flashinfer = false keeps BF16 on the own kernel (tests compare the two).
  PagedAttention(const KvPoolLayout& layout, uint32_t n_heads, uint32_t max_tokens,
                 uint32_t max_seqs, bool allow_flashinfer = true);
  ~PagedAttention();
  PagedAttention(const PagedAttention&) = delete;
  PagedAttention& operator=(const PagedAttention&) = delete;

  // Once per forward: index arrays and mask bits built on the host in pinned staging and
  // uploaded asynchronously on `stream`; grows its buffers if the batch is bigger than planned.
  // Throws pith::Error on an inconsistent sequence (mask runs not summing to context_len,
  // page table too short, n_q > context_len).
  // for_graph: the launches are captured into (or replayed from) a CUDA graph, so they must
  // depend only on the row count: the own kernel, with the split count of the longest context.
  void plan(std::span<const AttentionSequence> seqs, cudaStream_t stream, bool for_graph = false);
  // One layer: q and out [n_tokens][n_heads][head_dim] (layout.dtype); GQA/MQA by n_heads /
  // n_kv_heads; reads K/V of `layer` from `pool`. `options` carries the family's query scale,
  // soft-cap and sliding window; a layer with a soft-cap or a window runs on the own kernel
  // (FlashInfer is instantiated without those variants).
  void run(uint32_t layer, const void* q, const void* pool, void* out, cudaStream_t stream,
           const AttentionOptions& options = {});

  // A hash of everything the last plan() made run() pass by value (device array addresses, row
  // count, split settings): two steps with equal fingerprints launch identical kernels for a
  // layer, which is what replaying a CUDA graph of one for the other requires.
  uint64_t launch_fingerprint() const;

  // Caps the own kernel's KV splits (split-K decode, attention/paged_attention_kernel.h);
  // 1 turns splitting off. Tests and timings compare the two.
  void set_max_kv_splits(uint32_t n);
  // The own kernel's former chunk reductions (attn::KernelParams::rescan_chunk), for timing.
  void set_chunk_rescan(bool on);

  // Why FlashInfer cannot run a pool of this layout (not built in, F32, mixed head shapes, a
  // head_dim it is not instantiated for), or empty when it can.
  static std::string flashinfer_unsuitable(const KvPoolLayout& layout, uint32_t n_heads);
  // Which implementation run() uses for this layout ("flashinfer" or "pith"), for logs. A batch
  // whose query rows are not packed per sequence in plan order runs on the own kernel.
  const char* implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pith::cuda
