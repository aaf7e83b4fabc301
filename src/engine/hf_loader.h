// Llama-family models from a Hugging Face folder: config.json (LlamaForCausalLM) plus
// model.safetensors or sharded model-XXXXX-of-YYYYY.safetensors with model.safetensors.index.json.
//
// Q/K projection rows are permuted once at load from HF's split-half rotary layout to pith's
// (GGUF's) adjacent-pair layout: for head h and i < head_dim/2, pith row h*hd + 2i is HF row
// h*hd + i and pith row h*hd + 2i + 1 is HF row h*hd + hd/2 + i. Everything else is used in
// place from the mapping (unless misaligned for its dtype, then copied once).
#pragma once

#include <memory>
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/model_loader.h"

namespace pith {

// Parses `folder`/config.json. Throws pith::Error naming the file on missing keys, an
// unknown architecture or an unsupported rope scaling.
ModelConfig hf_model_config(const std::string& folder);

std::shared_ptr<ModelWeights> load_hf_model(const std::string& folder, const LoadOptions& options);

// Row index maps between the layouts, for a matrix of n_heads heads of head_dim rows each.
// hf_row_for_pith_row(r) is the HF row that pith row r comes from; the inverse maps back.
// A family's option keys read from a config.json object (null counts as absent); `path` names
// it in errors. model gen configures its presets through the same reader.
// looked_up, when given, collects the top-level keys the family looked for (found or not).
std::unique_ptr<ArchitectureKeys> hf_config_keys(const nlohmann::json& config, std::string path,
                                                 std::set<std::string>* looked_up = nullptr);

size_t hf_row_for_pith_row(size_t pith_row, uint32_t head_dim);
size_t pith_row_for_hf_row(size_t hf_row, uint32_t head_dim);

}  // namespace pith
