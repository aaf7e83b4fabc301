// The CUDA backend (docs/gpu.md): the Backend seam (engine/backend.h) on one NVIDIA GPU. Weights,
// the paged KV pool, Embed slots and every activation live in device memory; one forward is one
// stream of kernels and cuBLASLt GEMMs, and only the small results (top-K ids and probabilities,
// the logits rows that were asked for) come back to the host.
//
// This header has no CUDA includes: the backend factory and the CLI include it in plain C++
// builds, and it exists only when the project is built with CUDA (PITH_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace pith {

// Number of usable CUDA devices; 0 when there is no driver, no GPU or the runtime fails to
// start. Never throws.
int cuda_device_count();

// A CudaBackend on device `device_index`. Uploads the weights (BF16/F16 -> BF16, F32 kept,
// Q8_0/Q4_0 dequantised to BF16), then allocates the KV pool (options.kv_memory_bytes), the Embed
// slots and the workspace. Throws pith::Error when the device does not exist, the model's shapes
// are unsupported, or weights + KV pool + workspace exceed options.gpu_memory_fraction of the
// device memory.
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const ModelWeights> weights,
                                           const BackendOptions& options, int device_index);

// Device and wall time of the last forward() of a backend made by make_cuda_backend (CUDA
// events around the forward's work on its stream; wall from entry to return). Throws
// pith::Error for any other backend.
struct CudaStepTime {
  double gpu_ms = 0;
  double wall_ms = 0;
};
CudaStepTime cuda_last_step_time(const Backend& backend);

// Decode-step CUDA graphs of a backend made by make_cuda_backend (BackendOptions::cuda_graphs):
// whether they are in use, how many were captured and how many steps replayed one. Throws
// pith::Error for any other backend.
struct CudaGraphStats {
  bool enabled = false;
  uint64_t captures = 0;
  uint64_t replays = 0;
};
CudaGraphStats cuda_graph_stats(const Backend& backend);

// The skinny-product choices of a backend made by make_cuda_backend (engine/cuda/gemm.h): how
// many shapes were timed into each kernel so far. Throws pith::Error for any other backend.
struct CudaGemmChoices {
  uint32_t own_gemv = 0, cublas = 0;          // products of at most 8 rows
  uint32_t fused_gate = 0, unfused_gate = 0;  // gate/up projections with their activation
};
CudaGemmChoices cuda_gemm_choices(const Backend& backend);

}  // namespace pith
