// `pith model gen`: writes a loadable model of any supported family (engine/architectures)
// with random weights, as a GGUF file or a Hugging Face folder, with the real shapes of
// popular models (presets) and a real vocabulary taken from a GGUF vocab file. Used to test and
// benchmark at real sizes without downloading weights.
//
// Weights: matrices N(0, 0.02²), norm weights 1 + N(0, 0.02²). Every row is drawn from its own
// stream seeded by (seed, tensor, row) in pith's (GGUF) rotary layout, so generation is
// multi-threaded yet deterministic, and the HF output of a seed holds exactly the same values
// as the GGUF output (Q/K rows written in HF's split-half order, norms rounded to the HF dtype
// before being stored as f32 in GGUF). Data is streamed to disk in bounded batches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/model_config.h"
#include "common/thread_pool.h"
#include "formats/dtype.h"
#include "model_gen/quant_mix.h"

namespace pith {

struct Llama3RopeScaling {
  float factor = 32.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  uint32_t original_context = 8192;
};

struct ModelPreset {
  std::string name;
  ModelConfig config;  // vocab_size 0: taken from the vocabulary file
  std::optional<Llama3RopeScaling> rope_scaling;
};

// A shape preset ("tiny", "tiny256", "llama3.2-1b", ..., "qwen3-0.6b", "gemma3-1b", ...) as a
// model of family `arch`. The generic shapes (tiny, tiny256) take any family, with small
// sliding windows and soft-caps so short prompts exercise them; a named model's preset is of
// its own family ("" picks it). Throws pith::Error for an unknown name or a mismatch.
// `overrides` are KEY=VALUE config.json options applied over the preset's (e.g.
// num_kv_shared_layers=2, layer_types=[...], num_hidden_layers=6).
ModelPreset model_preset(const std::string& name, const std::string& arch = "",
                         const std::vector<std::string>& overrides = {});
std::vector<std::string> model_preset_names();

struct ModelGenOptions {
  std::string preset = "tiny";
  std::string arch;                  // family (engine/architectures); "": the preset's own
  std::vector<std::string> options;  // KEY=VALUE family options over the preset's
  DType dtype = DType::F32;          // matrices; block-quantised types only with GGUF
  std::optional<QuantMix> mix;  // instead of dtype: llama.cpp's per-tensor K-quant types (GGUF)
  std::string vocab_path;       // GGUF file holding tokenizer.* metadata
  std::string format = "gguf";  // "gguf" (output is a file) or "hf" (output is a folder)
  uint64_t seed = 0;
  std::string output;
  uint64_t shard_bytes = uint64_t{2} << 30;  // HF: a new shard once a shard would exceed this
  bool quiet = false;
};

struct ModelGenResult {
  std::vector<std::string> files;  // every file written
  uint64_t bytes = 0;              // their total size
  uint64_t n_params = 0;
  double seconds = 0;
};

// Throws pith::Error for a bad preset, dtype/format combination, vocabulary or output path.
ModelGenResult generate_model(const ModelGenOptions& options, ThreadPool& pool);

}  // namespace pith
