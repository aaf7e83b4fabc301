// FlashInfer batch paged prefill, causal mask, BF16, head_dim 64 and 128.
#include "engine/cuda/attention/flashinfer_prefill_run.cuh"

namespace pith::cuda::fi {

void prefill_run_causal(const PrefillArgs& args, const PlanInfo& info, cudaStream_t stream) {
  run_prefill<flashinfer::MaskMode::kCausal>(args, info, stream);
}

}  // namespace pith::cuda::fi
