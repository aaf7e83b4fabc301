// Per-layer token embeddings on the device (gemma4 E2B/E4B; the CPU's Engine::per_layer_inputs
// and the branch at the end of each layer in engine.cpp):
//   once per forward, from the scaled token embeddings x [T][d] (F32) and the rows' tokens:
//     in = (rmsnorm_per_layer(W_model_proj x / sqrt(d)) + E_pl[token] * sqrt(d_pl)) / sqrt(2)
//        [T][n_layers * d_pl]                          cuBLASLt, rmsnorm_rows, embed_rows, adds
//   per layer, after its FFN's residual add:
//     x += rmsnorm(W_proj (gelu(W_gate x) * in[:, layer]))  cuBLASLt, gated_activation, add_rows
// Everything before the final conversion of `in` runs in F32, as on the CPU.
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

class PerLayerInputs {
 public:
  PerLayerInputs(const ModelConfig& config, DType act);
  // Workspace bytes per batch token (what ensure() allocates per token); 0 without per-layer
  // embeddings.
  static size_t token_bytes(const ModelConfig& config, DType act);
  void ensure(uint32_t n_tokens);
  size_t bytes() const;
  // The workspace's device addresses (they move when ensure() grows it), for launch fingerprints.
  void mix_addresses(Fingerprint& f) const;

  // The forward's per-layer inputs, from x (F32 [T][d], the scaled token embeddings or Embed
  // rows) and tokens (device [T]: each row's token, 0 for a row with none).
  void prepare(const DeviceWeights& w, const float* x, const int32_t* tokens, uint32_t T,
               Gemm& gemm, cudaStream_t stream);
  // Layer `layer`'s branch: x (F32 [T][d], the residual with every earlier add applied) +=
  // rmsnorm(W_proj (gelu(W_gate x) * in[:, layer])); `scratch` is F32 [T][d].
  void apply(const DeviceLayer& layer_weights, uint32_t layer, float* x, uint32_t T, float* scratch,
             Gemm& gemm, cudaStream_t stream);

 private:
  const ModelConfig& c_;
  DType act_;
  uint32_t tokens_ = 0;
  DeviceBuffer x_act_;         // act [T][d]: x converted for the GEMMs
  DeviceBuffer proj_, rows_;   // F32 [T][n_layers d_pl]: projection, embedding rows
  DeviceBuffer in_;            // act [T][n_layers d_pl]: the per-layer inputs
  DeviceBuffer gate_, mixed_;  // act [T][n_layers d_pl] (first d_pl columns used), [T][d_pl]
};

}  // namespace pith::cuda
