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
// windows, a second RoPE base, YaRN, gated attention outputs, Gated DeltaNet layers, routed
// experts with an optional shared expert or beside a dense FFN, and gemma4's per-layer
// attention shapes, V norms, KV-sharing layers, layer scales, per-layer FFN widths and per-layer
// token embeddings: every family model_gen writes. An option added to family_option_summary is
// named here until the backend handles it.
std::string unsupported_family_options(const ModelConfig& config);

}  // namespace pith::cuda
