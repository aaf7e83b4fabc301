// Launcher of the project's own paged-attention kernel (paged_attention_kernel.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/cuda/attention/paged_attention_kernel.h"
#include "engine/cuda/attention/paged_kv.h"

namespace pith::cuda {

// One launch over n_rows query rows; `dtype` is the element type of q, out and the pool. With
// params.n_splits > 1 (its scratch set, attn::split_scratch_floats), a second launch merges the
// splits into `out`.
void launch_own_attention(const attn::KernelParams& params, uint32_t n_rows, DType dtype,
                          cudaStream_t stream);

}  // namespace pith::cuda
