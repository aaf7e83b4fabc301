// One FlashInfer batch paged-prefill launch for a mask mode (included by the per-mask .cu
// files, which each instantiate head_dim 64 and 128 with CTA tiles 16, 64 and 128).
#pragma once

#include <cuda_bf16.h>

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <string>

#include "engine/cuda/attention/attention_error.h"
#include "engine/cuda/attention/flashinfer_prefill.h"

namespace pith::cuda::fi {

template <flashinfer::MaskMode kMask, uint32_t kHeadDim>
cudaError_t launch_prefill(const PrefillArgs& a, const flashinfer::PrefillPlanInfo& plan,
                           cudaStream_t stream) {
  using namespace flashinfer;
  using Bf16 = __nv_bfloat16;
  using Params = BatchPrefillPagedParams<Bf16, Bf16, Bf16, int32_t>;
  using Variant = DefaultAttention</*custom_mask=*/kMask == MaskMode::kCustom,
                                   /*sliding_window=*/false, /*soft_cap=*/false, /*alibi=*/false>;
  // NHD pages inside the pool: [page][slot][kv_head][dim] with the pool's page stride.
  const int64_t strides[3] = {a.page_stride, int64_t{a.n_kv_heads} * a.head_dim, a.head_dim};
  paged_kv_t<Bf16, int32_t> kv(a.n_kv_heads, a.page_size, a.head_dim, a.batch, QKVLayout::kNHD,
                               static_cast<Bf16*>(const_cast<void*>(a.k)),
                               static_cast<Bf16*>(const_cast<void*>(a.v)), strides, strides,
                               a.kv_page_indices, a.kv_page_indptr, a.kv_last_page_len);
  Params p(static_cast<Bf16*>(const_cast<void*>(a.q)), kv,
           kMask == MaskMode::kCustom ? a.mask_bits : nullptr, a.qo_indptr,
           kMask == MaskMode::kCustom ? a.mask_indptr : nullptr, /*q_rope_offset=*/nullptr,
           static_cast<Bf16*>(a.out), /*lse=*/nullptr, /*alibi_slopes=*/nullptr, a.n_heads,
           /*q_stride_n=*/int32_t(a.n_heads * a.head_dim), /*q_stride_h=*/int32_t(a.head_dim),
           /*window_left=*/-1, /*logits_soft_cap=*/0.f, a.sm_scale, /*rope_scale=*/1.f,
           /*rope_theta=*/1e4f);
  char* ints = static_cast<char*>(a.int_ws);
  p.request_indices = reinterpret_cast<int32_t*>(ints + plan.request_indices_offset);
  p.qo_tile_indices = reinterpret_cast<int32_t*>(ints + plan.qo_tile_indices_offset);
  p.kv_tile_indices = reinterpret_cast<int32_t*>(ints + plan.kv_tile_indices_offset);
  p.o_indptr = reinterpret_cast<int32_t*>(ints + plan.o_indptr_offset);
  p.kv_chunk_size_ptr = reinterpret_cast<int32_t*>(ints + plan.kv_chunk_size_ptr_offset);
  p.padded_batch_size = plan.padded_batch_size;
  p.max_total_num_rows = plan.total_num_rows;
  p.partition_kv = plan.split_kv;
  Bf16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (plan.split_kv) {
    p.merge_indptr = reinterpret_cast<int32_t*>(ints + plan.merge_indptr_offset);
    tmp_v = reinterpret_cast<Bf16*>(static_cast<char*>(a.float_ws) + plan.v_offset);
    tmp_s = reinterpret_cast<float*>(static_cast<char*>(a.float_ws) + plan.s_offset);
  }
  constexpr auto kPos = PosEncodingMode::kNone;
  switch (plan.cta_tile_q) {
    case 16:
      return BatchPrefillWithPagedKVCacheDispatched<true, 16, kHeadDim, kHeadDim, kPos, false,
                                                    kMask, Variant, Params>(p, tmp_v, tmp_s, false,
                                                                            stream);
    case 64:
      return BatchPrefillWithPagedKVCacheDispatched<true, 64, kHeadDim, kHeadDim, kPos, false,
                                                    kMask, Variant, Params>(p, tmp_v, tmp_s, false,
                                                                            stream);
    case 128:
      return BatchPrefillWithPagedKVCacheDispatched<true, 128, kHeadDim, kHeadDim, kPos, false,
                                                    kMask, Variant, Params>(p, tmp_v, tmp_s, false,
                                                                            stream);
    default:
      throw_attention_error("FlashInfer prefill: unexpected CTA tile " +
                            std::to_string(plan.cta_tile_q));
  }
}

template <flashinfer::MaskMode kMask>
void run_prefill(const PrefillArgs& a, const PlanInfo& info, cudaStream_t stream) {
  flashinfer::PrefillPlanInfo plan;
  cudaError_t status = cudaSuccess;
  try {
    plan.FromVector(info);
    if (a.head_dim == 64)
      status = launch_prefill<kMask, 64>(a, plan, stream);
    else if (a.head_dim == 128)
      status = launch_prefill<kMask, 128>(a, plan, stream);
    else
      throw_attention_error("FlashInfer prefill: head_dim " + std::to_string(a.head_dim) +
                            " is not instantiated (64, 128)");
  } catch (const flashinfer::Error& e) {
    throw_attention_error(std::string("FlashInfer prefill: ") + e.what());
  }
  if (status != cudaSuccess)
    throw_attention_error(std::string("FlashInfer prefill: ") + cudaGetErrorString(status));
}

}  // namespace pith::cuda::fi
