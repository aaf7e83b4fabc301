// The model's weights in device memory, uploaded once when the backend starts.
//
// Compute mode: F32 when every matrix of the model is F32 (GEMMs in FP32 without TF32, F32 KV),
// else BF16: BF16 matrices are copied as stored, F16 ones converted, and Q8_0/Q4_0 dequantised
// to BF16 once at load. Dequantising once (instead of a dequantising GEMM) keeps every GEMM on
// cuBLASLt's tensor-core kernels; it costs device memory (2 bytes per weight instead of ~1.06
// or ~0.56), which an 80 GB GPU has for the models pith serves. Norm vectors stay F32.
//
// gate and up are stored as one [2 * d_ff][d_model] matrix (gate rows first), so one GEMM
// computes both and SwiGLU reads them with a leading dimension of 2 * d_ff; a MoE layer's
// experts are stacked the same way, expert after expert, for the one-launch expert GEMM. A tied
// LM head shares the embedding table's device copy.
//
// Upload streams each tensor from the mapped file through two pinned staging buffers (convert
// one chunk while the previous one is copied): host memory never holds a second copy of the
// model, and the log shows progress. Vectors (norms, biases) are uploaded as F32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "engine/cuda/device_memory.h"
#include "engine/cuda/gemm.h"
#include "engine/model_weights.h"

namespace pith::cuda {

struct DeviceLayer {
  const float* attn_norm = nullptr;  // [d_model]
  const float* ffn_norm = nullptr;   // [d_model]
  // The families' vectors (model_weights.h), null where the model has none: Q/K/V biases
  // [q_dim], [kv_dim] x2, per-head Q/K norms [head_dim], norms of the attention and FFN outputs
  // [d_model].
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const float *q_norm = nullptr, *k_norm = nullptr;
  const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;
  // Gated DeltaNet layers (hybrid models), instead of wq..wo: the projections and the conv
  // kernel [conv_kernel][conv_channels], dt_bias and A [v_heads], the output norm [v_dim].
  DeviceMatrix ssm_qkv, ssm_gate, ssm_beta, ssm_alpha, ssm_out;
  const float *ssm_conv_t = nullptr, *ssm_dt_bias = nullptr, *ssm_a = nullptr;
  const float* ssm_norm = nullptr;
  DeviceMatrix wq, wk, wv, wo;
  // wq, wk and wv seen as one [q_dim + 2 kv_dim][d_model] matrix where the upload left them back
  // to back (each a multiple of the 256-byte alignment: every real shape), for one QKV GEMM;
  // null data otherwise.
  DeviceMatrix wqkv;
  DeviceMatrix w_gate_up;  // [2 * d_ff][d_model]
  DeviceMatrix w_down;
  // Mixture of experts (n_experts > 0), instead of w_gate_up / w_down: the router [E][d_model];
  // every expert's gate rows then up rows, stacked [E][2 d_ff_expert][d_model], and its down
  // projection, stacked [E][d_model][d_ff_expert] (rows counts all experts'); the shared expert
  // like the dense pair, and its gate as a [1][d_model] matrix.
  DeviceMatrix router, exp_gate_up, exp_down;
  DeviceMatrix sh_gate_up, sh_down, sh_gate_inp;
  // gemma4: experts beside the dense FFN (moe_beside_dense): the router input's norm weight, the
  // experts' output scales [E], the norms of the experts' input and of both branches' outputs
  // [d_model]; per-layer token embeddings: the gate
  // [d_pl][d_model], the projection [d_model][d_pl] and its output norm; the layer's output
  // scale (layer_scale; 1 otherwise).
  const float *router_scale = nullptr, *expert_scale = nullptr;
  const float *pre_ffn_norm2 = nullptr, *post_ffn_norm1 = nullptr, *post_ffn_norm2 = nullptr;
  DeviceMatrix ple_gate, ple_proj;
  const float* ple_post_norm = nullptr;
  float layer_scale = 1.0f;
};

// F32 when every matrix is F32, else BF16 (see above).
DType compute_mode(const ModelWeights& weights);

// Bytes the device copy of `weights` takes in `mode` (what DeviceWeights allocates).
size_t device_weight_bytes(const ModelWeights& weights, DType mode);

class DeviceWeights {
 public:
  // Allocates device_weight_bytes(weights, mode) and uploads on `stream`; returns when the
  // upload has finished. Throws pith::Error on a matrix type the backend cannot convert.
  DeviceWeights(const ModelWeights& weights, DType mode, cudaStream_t stream);

  DType dtype() const { return dtype_; }
  size_t bytes() const { return memory_.bytes(); }

  DeviceMatrix token_embd;
  DeviceMatrix output;  // == token_embd when tied
  const float* output_norm = nullptr;
  // Per-layer token embeddings (d_per_layer_input > 0): the table [vocab][n_layers d_pl], the
  // projection of the token embedding [n_layers d_pl][d_model] and its norm [d_pl].
  DeviceMatrix ple_token_embd, ple_model_proj;
  const float* ple_proj_norm = nullptr;
  std::vector<DeviceLayer> layers;

 private:
  DType dtype_;
  DeviceBuffer memory_;  // every tensor, carved at 256-byte boundaries
};

}  // namespace pith::cuda
