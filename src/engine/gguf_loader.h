// Llama-family models from a GGUF file (llama.cpp's format): config from the `llama.*`
// metadata, matrices used in place from the mapping, norms converted to f32.
#pragma once

#include <memory>
#include <string>

#include "engine/model_loader.h"
#include "formats/gguf.h"

namespace pith {

// The model config described by a GGUF file's metadata (and rope_freqs.weight / token count).
// Throws pith::Error naming the file for a missing key, unsupported architecture or bad value.
ModelConfig gguf_model_config(const GGUFFile& file);

std::shared_ptr<ModelWeights> load_gguf_model(const std::string& path, const LoadOptions& options);

}  // namespace pith
