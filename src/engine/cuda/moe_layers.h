// The mixture-of-experts FFN on the device (qwen2moe, qwen3moe, qwen35moe; the CPU's
// engine/moe_ffn.h). Routing runs on the device (kernels/moe_body.h), so a step needs no host
// round trip: the router GEMM (cuBLASLt), softmax + top-K, the choices grouped by expert, one
// launch for every expert's gate/up rows over its gathered tokens, the gated activation over
// all slots, one launch for the down rows, the weighted combine into the layer's output, and
// the shared expert (dense GEMMs, scaled per token by sigmoid(w . h)) where the family has one.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/model_config.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"

namespace pith::cuda {

struct Fingerprint;  // decode_graphs.h

class MoeFfn {
 public:
  MoeFfn(const ModelConfig& config, DType act);
  // Workspace bytes per batch token (what ensure() allocates per token); 0 for dense models.
  static size_t token_bytes(const ModelConfig& config, DType act);
  void ensure(uint32_t n_tokens);
  size_t bytes() const;
  // The workspace's device addresses (they move when ensure() grows it), for launch fingerprints.
  void mix_addresses(Fingerprint& f) const;

  // out (F32 [T][d_model]) = the layer's expert FFN of h (act [T][d_model]), routed from
  // router_in (act [T][d_model]) where given, else from h; each expert's output weight times
  // its expert_scale where the layer has them.
  void run(const DeviceLayer& layer, const void* h, uint32_t T, float* out, Gemm& gemm,
           cudaStream_t stream, const void* router_in = nullptr);

  // gemma4 26B-A4B (moe_beside_dense; the CPU's Engine::experts_beside_dense): dense (F32
  // [T][d], the dense FFN's output) becomes norm1(dense) + norm2(experts(norm_pre2(x))), routed
  // from rmsnorm(x) * router_scale / sqrt(d); x is the residual (F32 [T][d], only read).
  void run_beside_dense(const DeviceLayer& layer, float* x, uint32_t T, float* dense, Gemm& gemm,
                        cudaStream_t stream);

 private:
  const ModelConfig& c_;
  DType act_;
  uint32_t tokens_ = 0;
  DeviceBuffer logits_;                            // F32 [T][E]
  DeviceBuffer experts_, weights_;                 // [T][K]: u32, F32
  DeviceBuffer offsets_;                           // u32 [E + 1]
  DeviceBuffer slot_token_, slot_of_;              // u32 [T K]
  DeviceBuffer gate_up_, ff_;                      // act [T K][2 d_ff_expert], [T K][d_ff_expert]
  DeviceBuffer y_;                                 // F32 [T K][d_model]
  DeviceBuffer sh_gate_up_, sh_ff_, sh_y_, sh_g_;  // act [T][2 ff_sh], [T][ff_sh]; F32 [T][d], [T]
  DeviceBuffer in_, route_, out_;                  // moe_beside_dense: act [T][d] x2, F32 [T][d]
};

}  // namespace pith::cuda
