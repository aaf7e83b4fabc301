// Launchers of the LM-head reduction (topk_body.h): phase 1 over (chunk, row) blocks, phase 2
// one block per row, both on `stream`, meeting in the caller's workspace.
#include <cstddef>

#include "backend/forward_batch.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/launch_check.h"
#include "engine/cuda/kernels/topk_body.h"

namespace pith::cuda {
namespace {

__global__ void __launch_bounds__(kern::kTopKThreads)
    topk_chunk_kernel(const float* logits, uint32_t vocab, const uint32_t* ks,
                      kern::TokenMasks masks, kern::TopKWorkspace w, unsigned char* workspace) {
  PITH_SHARED(kern::TopKChunkShared, sh);
  kern::topk_chunk_body(kern::DeviceBlock::current(), sh, logits, vocab, ks, masks, w, workspace);
}

__global__ void __launch_bounds__(kern::kMergeThreads)
    topk_merge_kernel(uint32_t vocab, const uint32_t* ks, kern::TokenMasks masks,
                      kern::TopKWorkspace w, const unsigned char* workspace, int32_t* out_ids,
                      float* out_probs) {
  PITH_SHARED(kern::TopKMergeShared, sh);
  kern::topk_merge_body(kern::DeviceBlock::current(), sh, vocab, ks, masks, w, workspace, out_ids,
                        out_probs);
}

__global__ void __launch_bounds__(kern::kAdjustThreads)
    adjust_logits_kernel(float* logits, uint32_t vocab, kern::LogitAdjusts a) {
  PITH_EACH_THREAD(t)
  kern::adjust_logits_body(blockIdx.x, t, kern::kAdjustThreads, logits, vocab, a);
}

}  // namespace

static_assert(kTopKMax == kern::kTopKLimit);
static_assert(sizeof(kern::LogitAdjust) == sizeof(LogitAdjustment));
static_assert(offsetof(kern::LogitAdjust, bias) == offsetof(LogitAdjustment, bias));
static_assert(offsetof(kern::LogitAdjust, repetition) == offsetof(LogitAdjustment, repetition));
static_assert(offsetof(kern::LogitAdjust, penalty) == offsetof(LogitAdjustment, penalty));

void adjust_logits(float* logits, uint32_t rows, uint32_t vocab, const uint32_t* adjust_at,
                   const uint32_t* tail, cudaStream_t stream) {
  if (rows == 0 || vocab == 0) return;
  require(rows <= 65535, "adjust_logits", "more than 65535 rows");
  kern::launch(rows, kern::kAdjustThreads, stream, PITH_KERNEL(adjust_logits_kernel))(
      logits, vocab, kern::LogitAdjusts{adjust_at, tail});
  check_launch("adjust_logits");
}
static_assert(kNoTokenMask == kern::TokenMasks::kNone);

size_t topk_workspace_bytes(uint32_t rows, uint32_t vocab, uint32_t k_max) {
  return kern::topk_workspace_bound(rows, vocab, k_max);
}

void softmax_topk(const float* logits, uint32_t rows, uint32_t vocab, const uint32_t* ks,
                  uint32_t k_max, void* workspace, int32_t* out_ids, float* out_probs,
                  cudaStream_t stream, const uint32_t* mask_at, const uint32_t* masks) {
  require(k_max <= kTopKMax, "softmax_topk", "k_max above 1024");
  require(rows <= 65535, "softmax_topk", "more than 65535 rows");
  if (rows == 0 || vocab == 0) return;
  kern::TopKWorkspace w = kern::topk_workspace(rows, vocab, k_max);
  auto* ws = static_cast<unsigned char*>(workspace);
  const kern::TokenMasks tm{mask_at, masks};
  kern::launch(dim3(w.n_chunks, rows), kern::kTopKThreads, stream, PITH_KERNEL(topk_chunk_kernel))(
      logits, vocab, ks, tm, w, ws);
  check_launch("softmax_topk (chunks)");
  kern::launch(rows, kern::kMergeThreads, stream, PITH_KERNEL(topk_merge_kernel))(
      vocab, ks, tm, w, ws, out_ids, out_probs);
  check_launch("softmax_topk (merge)");
}

}  // namespace pith::cuda
