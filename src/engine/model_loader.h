// Loading a model from disk: the options every loader takes, the shared config validation, and
// the load summary. `load_model` (model_weights.h) dispatches on the path: a file is GGUF
// (gguf_loader.h), a folder is a Hugging Face checkpoint (hf_loader.h).
//
// Loaders map the files and point WeightMatrix at the mapping; only tensors whose layout must
// change (HF Q/K rotary rows, misaligned safetensors data, norm vectors to f32) are copied, once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/model_weights.h"

namespace pith {

struct LoadOptions {
  bool quiet = false;  // no per-layer progress or summary on stderr
};

std::shared_ptr<const ModelWeights> load_model(const std::string& path, const LoadOptions& options);

// Throws pith::Error ("SOURCE: ...") when the config is unusable: zero or absurd sizes, heads
// that do not divide, odd head_dim, rope factors of the wrong length.
void validate_config(const ModelConfig& config, const std::string& source);

// Llama 3 rope scaling (HF `rope_scaling.rope_type == "llama3"`) turned into per-pair divisors.
std::vector<float> llama3_rope_freq_factors(uint32_t head_dim, float theta, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            uint32_t original_context);

// HF config.json's `rope_scaling` (llama3, linear, yarn, longrope/su; default and mrope change
// nothing; longrope reads original_max_position_embeddings from it, which the loader copies in
// from the top level where Phi-3 checkpoints keep it)
// applied to c once rope_theta, rope_dim and context_length are set. Throws pith::Error naming
// `source` on a missing or malformed value or an unknown type.
void apply_rope_scaling(ModelConfig& c, const nlohmann::json& rope_scaling,
                        const std::string& source);
// YaRN's default attention temperature: 1 + 0.1 ln factor (1 when factor <= 1).
float yarn_default_mscale(float factor);
// LongRoPE's default attention factor for a context `scale` times the original one:
// sqrt(1 + ln scale / ln original_context) (1 when scale <= 1), as transformers and llama.cpp's
// converter compute it.
float longrope_default_attn_factor(double scale, uint32_t original_context);
// Sets c.rope_freq_factors from c.longrope for c.context_length (see LongRope).
void choose_longrope_factors(ModelConfig& c);

// "f32", "q8_0", or "mixed (f32, q8_0)" over all matrices.
std::string dtype_summary(const ModelWeights& weights);

// Peak resident set size of this process so far, in bytes (getrusage).
size_t peak_rss_bytes();

// One line: name, format, parameters, dtype, weight bytes, load time, peak RSS.
std::string load_summary(const ModelWeights& weights, double load_seconds);

// Logs per-layer progress to stderr unless quiet.
void log_layer_progress(const LoadOptions& options, const std::string& source, uint32_t layer,
                        uint32_t n_layers);

}  // namespace pith
