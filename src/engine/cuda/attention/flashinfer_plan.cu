// FlashInfer's batch-prefill scheduler (host code from attention/scheduler.cuh).
#include <flashinfer/attention/scheduler.cuh>
#include <string>

#include "engine/cuda/attention/attention_error.h"
#include "engine/cuda/attention/flashinfer_prefill.h"

namespace pith::cuda::fi {

namespace {

template <bool kMaterialize>
void plan_impl(const PlanShape& s, size_t& float_bytes, size_t& int_bytes, void* float_ws,
               size_t float_capacity, void* int_ws, void* int_pinned, size_t int_capacity,
               PlanInfo* info, cudaStream_t stream) {
  flashinfer::PrefillPlanInfo plan;
  cudaError_t status;
  try {
    status = flashinfer::PrefillPlanImpl<kMaterialize, int32_t>(
        float_bytes, int_bytes, float_ws, float_capacity, int_ws, int_pinned, int_capacity, plan,
        const_cast<int32_t*>(s.qo_indptr_h), const_cast<int32_t*>(s.kv_page_indptr_h), s.n_rows,
        s.batch, s.n_heads, s.n_kv_heads, s.head_dim, s.head_dim, s.page_size,
        /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, /*window_left=*/-1,
        /*fixed_split_size=*/-1, /*disable_split_kv=*/false, /*num_colocated_ctas=*/0,
        /*uniform_q_len=*/0, stream, /*kv_dtype_bytes=*/2);
  } catch (const std::exception& e) {
    throw_attention_error(std::string("FlashInfer prefill plan: ") + e.what());
  }
  if (status != cudaSuccess)
    throw_attention_error(std::string("FlashInfer prefill plan: ") + cudaGetErrorString(status));
  if (info) *info = plan.ToVector();
}

}  // namespace

void prefill_workspace_bytes(const PlanShape& shape, size_t& float_bytes, size_t& int_bytes) {
  plan_impl<false>(shape, float_bytes, int_bytes, nullptr, 0, nullptr, nullptr, 0, nullptr,
                   nullptr);
}

void prefill_plan(const PlanShape& shape, void* float_ws, size_t float_bytes, void* int_ws,
                  void* int_pinned, size_t int_bytes, PlanInfo& info, cudaStream_t stream) {
  size_t used_float = 0, used_int = 0;
  plan_impl<true>(shape, used_float, used_int, float_ws, float_bytes, int_ws, int_pinned, int_bytes,
                  &info, stream);
}

}  // namespace pith::cuda::fi
