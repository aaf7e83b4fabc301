// The project's entry points into FlashInfer's batch paged-prefill templates (BF16, NHD pages
// with KvPoolLayout's page stride, head_dim 64 or 128, causal or custom-mask), declared without
// FlashInfer's headers so only the .cu files that instantiate them pay for those.
//
// Decode rows go through the same prefill kernel: with GQA it packs a KV head's whole query-head
// group into one tensor-core tile (FlashInfer's own "decode with tensor cores" path does the
// same), and a mixed prefill + decode batch stays one launch. The scheduler (FlashInfer's
// PrefillPlan) may split long contexts over several CTAs (split-KV) and merge them; its int
// workspace is staged in pinned memory and uploaded on the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pith::cuda::fi {

inline bool prefill_supports(uint32_t head_dim, uint32_t n_heads, uint32_t n_kv_heads) {
  return (head_dim == 64 || head_dim == 128) && n_kv_heads > 0 && n_heads % n_kv_heads == 0;
}

// FlashInfer's PrefillPlanInfo as its ToVector() form: opaque here.
using PlanInfo = std::vector<int64_t>;

struct PlanShape {
  const int32_t* qo_indptr_h;       // [batch + 1] host
  const int32_t* kv_page_indptr_h;  // [batch + 1] host
  uint32_t batch, n_rows, n_heads, n_kv_heads, head_dim, page_size;
};

// Workspace bytes the plan for `shape` needs (host-only arithmetic plus a device query).
void prefill_workspace_bytes(const PlanShape& shape, size_t& float_bytes, size_t& int_bytes);
// Schedules the batch: writes FlashInfer's work list into `int_pinned` and uploads it to
// `int_ws` on `stream`. The pinned buffer must not be rewritten before that copy ran.
void prefill_plan(const PlanShape& shape, void* float_ws, size_t float_bytes, void* int_ws,
                  void* int_pinned, size_t int_bytes, PlanInfo& info, cudaStream_t stream);

struct PrefillArgs {
  const void* q;        // BF16 [rows][n_heads][head_dim], rows packed per qo_indptr
  void* out;            // same shape
  const void* k;        // the layer's K block of page 0: pool + block_offset(0, layer, 0)
  const void* v;        // pool + block_offset(0, layer, 1)
  int64_t page_stride;  // elements between pages
  uint32_t n_heads, n_kv_heads, head_dim, page_size, batch;
  // Device arrays of the AttentionPlan.
  int32_t* qo_indptr;
  int32_t* kv_page_indptr;
  int32_t* kv_page_indices;
  int32_t* kv_last_page_len;
  uint8_t* mask_bits;    // custom only
  int32_t* mask_indptr;  // custom only: byte offsets, one per sequence
  float sm_scale;
  void* float_ws;
  void* int_ws;
};

// Throw pith::Error when FlashInfer reports a failure.
void prefill_run_causal(const PrefillArgs& args, const PlanInfo& info, cudaStream_t stream);
void prefill_run_custom(const PrefillArgs& args, const PlanInfo& info, cudaStream_t stream);

}  // namespace pith::cuda::fi
