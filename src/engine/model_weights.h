// The weights of a loaded model, used in place from the memory-mapped file(s) where the
// layout allows (no second copy). Matrices keep their file dtype; norm vectors are f32.
//
// Rotary layout: pith uses GGUF's convention internally, Q/K rows permuted so that RoPE
// rotates adjacent pairs (2i, 2i+1). Hugging Face checkpoints use the split-half layout
// (i, i + head_dim/2); their Q/K rows are permuted once at load time, so both formats of the
// same model give bit-identical logits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/model_config.h"
#include "engine/architectures/architecture.h"
#include "engine/kernels/matmul.h"

namespace pith {

// Vectors that a family does not have stay empty (see ModelConfig's options). Fused
// projections (phi3) are row slices of one mapped matrix.
struct LayerWeights {
  std::vector<float> attn_norm;       // [d_model]
  WeightMatrix wq;                    // [q_dim][d_model] ([2 q_dim] with attn_output_gate)
  WeightMatrix wk;                    // [kv_dim][d_model]
  WeightMatrix wv;                    // [kv_dim][d_model]
  std::vector<float> bq, bk, bv;      // qkv_bias: [q_dim], [kv_dim], [kv_dim]
  std::vector<float> q_norm, k_norm;  // qk_norm: [head_dim]
  WeightMatrix wo;                    // [d_model][q_dim]
  std::vector<float> bo;              // attn_out_bias: [d_model]
  std::vector<float> sinks;           // attn_sinks: [n_heads]
  std::vector<float> post_attn_norm;  // post_norms: [d_model]
  std::vector<float> ffn_norm;        // [d_model]
  WeightMatrix w_gate;                // [d_ff][d_model]
  WeightMatrix w_up;                  // [d_ff][d_model]
  WeightMatrix w_down;                // [d_model][d_ff]
  std::vector<float> post_ffn_norm;   // post_norms: [d_model]
  // Mixture of experts (n_experts > 0), instead of w_gate/w_up/w_down.
  WeightMatrix router;  // [n_experts][d_model]
  std::vector<WeightMatrix> exp_gate, exp_up,
      exp_down;                          // [n_experts] of [d_ff_expert][d] / [d][ff]
  WeightMatrix sh_gate, sh_up, sh_down;  // shared expert, [d_ff_shared] wide
  std::vector<float> sh_gate_inp;        // [d_model]: sigmoid(. h) scales it
  // moe_bias: the router's [n_experts] and each expert's projection biases, [n_experts][width].
  std::vector<float> router_bias, exp_gate_bias, exp_up_bias, exp_down_bias;
  // Gated DeltaNet (recurrent layers of hybrid models), instead of wq..wo and the norms of Q/K.
  WeightMatrix ssm_qkv;            // [conv_channels][d_model]: q | k | v before the conv
  WeightMatrix ssm_gate;           // [value_dim][d_model]: z, the output gate
  WeightMatrix ssm_beta;           // [v_heads][d_model]: write strength (before sigmoid)
  WeightMatrix ssm_alpha;          // [v_heads][d_model]: decay input (before softplus)
  std::vector<float> ssm_conv_t;   // [conv_kernel][conv_channels]: the kernel, transposed
  std::vector<float> ssm_dt_bias;  // [v_heads]
  std::vector<float> ssm_a;        // [v_heads]: -exp(A_log), the decay rate
  std::vector<float> ssm_norm;     // [v_dim]: gated output norm
  WeightMatrix ssm_out;            // [d_model][value_dim]
  float layer_scale = 1.0f;        // layer_scale: the layer's output is multiplied by it
  // Per-layer token embeddings (d_per_layer_input > 0).
  WeightMatrix ple_gate;             // [d_per_layer][d_model]
  WeightMatrix ple_proj;             // [d_model][d_per_layer]
  std::vector<float> ple_post_norm;  // [d_model]
  // Experts beside the dense FFN (moe_beside_dense): router input scale, per-expert output
  // scale, the norms of the expert input and of the two branches' outputs.
  std::vector<float> router_scale;                                   // [d_model]
  std::vector<float> expert_scale;                                   // [n_experts]
  std::vector<float> pre_ffn_norm2, post_ffn_norm1, post_ffn_norm2;  // [d_model]
};

// The model-wide tensors of per-layer token embeddings (gemma4 E2B/E4B).
struct PerLayerEmbeddings {
  WeightMatrix token_embd;       // [vocab][n_layers * d_per_layer], read by rows
  WeightMatrix model_proj;       // [n_layers * d_per_layer][d_model]
  std::vector<float> proj_norm;  // [d_per_layer]
};

struct ModelWeights {
  ModelConfig config;
  std::string source;       // path it was loaded from
  std::string format;       // "gguf" or "hf"
  WeightMatrix token_embd;  // [vocab][d_model]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [d_model]
  WeightMatrix output;             // [vocab][d_model]; == token_embd when tied
  PerLayerEmbeddings per_layer;    // d_per_layer_input > 0 only

  size_t weight_bytes() const;  // bytes of all matrices (what one dense decode step streams)
  // Bytes one token's forward reads: all matrices, but only n_experts_used of each MoE layer's
  // experts (the LM head counted once).
  size_t active_weight_bytes() const;
  size_t n_params() const;

  // Keeps mappings and converted buffers alive for as long as the matrices point into them.
  std::vector<std::shared_ptr<const void>> storage;
};

// Calls fn on every weight matrix (token embedding, layers, experts, untied LM head).
void for_each_weight_matrix(const ModelWeights& weights,
                            const std::function<void(const WeightMatrix&)>& fn);

// Stores a loaded layer tensor (engine/architectures) where the forward pass reads it: vectors
// into their field, matrices into theirs, fused QKV / gate-up matrices split into row slices.
// A convolution kernel comes as a vector of its [rows][cols] values and is kept transposed.
void place_layer_vector(LayerWeights& layer, LayerTensor::Role role, std::vector<float> v,
                        const ModelConfig& config);
void place_layer_matrix(LayerWeights& layer, LayerTensor::Role role, const WeightMatrix& m,
                        const ModelConfig& config);
// One expert's matrix of a stacked expert tensor (GGUF slices it, HF stores it alone).
void place_layer_expert(LayerWeights& layer, LayerTensor::Role role, uint32_t expert,
                        const WeightMatrix& m, const ModelConfig& config);

// The family options beyond Llama's that the config uses, comma separated ("none" for a plain
// Llama); a backend that implements only some of them checks what is left (cuda/family_support.h).
std::string family_option_summary(const ModelConfig& config);

// Loads a GGUF file or a Hugging Face folder (config.json + *.safetensors). Throws pith::Error
// naming the file and the problem on malformed, truncated or unsupported input.
std::shared_ptr<const ModelWeights> load_model(const std::string& path);

// Dimensions non-zero, heads divisible by KV heads, every weight present with its shape;
// throws pith::Error naming the first mismatch. Every backend checks this at construction.
void validate_model_shapes(const ModelWeights& weights);

}  // namespace pith
