// FlashInfer batch paged prefill, custom (bit) mask, BF16, head_dim 64 and 128.
#include "engine/cuda/attention/flashinfer_prefill_run.cuh"

namespace pith::cuda::fi {

void prefill_run_custom(const PrefillArgs& args, const PlanInfo& info, cudaStream_t stream) {
  run_prefill<flashinfer::MaskMode::kCustom>(args, info, stream);
}

}  // namespace pith::cuda::fi
