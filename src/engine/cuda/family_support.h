// Which model-family options (ModelConfig, engine/model_weights.h's family_option_summary) the
// CUDA backend runs. Plain C++ so the check is unit-tested without a GPU.
#pragma once

#include <string>

#include "backend/model_config.h"

namespace pith::cuda {

// "none" when the backend runs every option the model uses, else the options it lacks, comma
// separated in family_option_summary's words (the startup error names them).
//
// Supported: split-half RoPE, partial rotary, GELU-tanh FFNs, Q/K/V biases, per-head Q/K norms,
// post-norms, scaled embeddings, a custom query scale, attention and final soft-caps, sliding
// windows, a second RoPE base, gated attention outputs, Gated DeltaNet layers and routed
// experts with an optional shared expert (llama, mistral, qwen2/2.5, qwen3, phi3, gemma2, gemma3,
// qwen3.5, qwen2/3 MoE, qwen3.5 MoE). Not yet: per-layer attention shapes, V norms, layer
// scales, per-layer FFN widths, per-layer embeddings and experts beside a dense FFN (gemma4).
std::string unsupported_family_options(const ModelConfig& config);

}  // namespace pith::cuda
