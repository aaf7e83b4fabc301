// `pith model gen-lora`: a random LoRA adapter for a base model, as a PEFT folder or a llama.cpp
// GGUF adapter (engine/lora_adapter.h), for tests and benchmarks without downloaded adapters.
//
// Values: A ~ N(0, std²) and B ~ N(0, std²) (a trained adapter's B is not zero), each row drawn
// from its own stream seeded by (seed, layer, target, A|B, row) in pith's rotary layout, so the
// PEFT and GGUF outputs of one seed hold exactly the same adapter (PEFT q/k B rows are written
// in HF's split-half order, as the HF base is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/lora_adapter.h"
#include "formats/dtype.h"

namespace pith {

struct LoraGenOptions {
  std::string base_path;        // the base model (GGUF file or HF folder): shapes and architecture
  std::string format = "peft";  // "peft" (a folder) or "gguf" (a file)
  std::string output;
  uint32_t rank = 16;
  float alpha = 32;
  std::vector<LoraTarget> targets;  // empty: all seven projections
  DType dtype = DType::F32;         // F32, F16 or BF16
  float std = 0.02f;
  uint64_t seed = 0;
};

struct LoraGenResult {
  std::vector<std::string> files;
  uint64_t bytes = 0;
  uint64_t n_params = 0;
};

// Parses "q,k,v,o,gate,up,down" (or PEFT's "q_proj", ...; "all"). Throws pith::Error on others.
std::vector<LoraTarget> parse_lora_targets(const std::string& list);

// Throws pith::Error on a bad base, format, dtype, rank or output path.
LoraGenResult generate_lora(const LoraGenOptions& options);

}  // namespace pith
