// LoRA adapters (paper Table 1, forward_with_adapter): low-rank deltas on a base model's linear
// layers, applied per sequence so one batch can mix sequences of several adapters and none.
//
// A target projection W [out][in] gains scale * B A with A [rank][in] and B [out][rank]:
//   y = W x + scale * B (A x),  scale = alpha / rank (alpha / sqrt(rank) with rsLoRA; 1 when
//   a GGUF adapter records alpha 0, as llama.cpp does).
// The deltas are never merged into W: a forward gathers the tokens of each adapter and runs two
// thin matmuls per target (engine/lora_delta.h), so an adapter costs only its own weights.
//
// Formats: a Hugging Face PEFT folder (adapter_config.json + adapter_model.safetensors) and
// llama.cpp's GGUF LoRA (general.type "adapter", adapter.type "lora", adapter.lora.alpha,
// tensors "<base tensor>.lora_a" / ".lora_b"). PEFT B rows of q_proj/k_proj are permuted into
// pith's rotary layout exactly as the HF loader permutes the base weights, so a PEFT adapter
// applies to a GGUF base of the same model and the other way round.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/model_config.h"
#include "engine/kernels/matmul.h"

namespace pith {

struct ModelWeights;

// The projections an adapter may change, in forward order.
enum class LoraTarget : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr size_t kLoraTargets = 7;
const char* lora_target_name(LoraTarget t);  // "q_proj", ..., "down_proj" (PEFT's names)

struct LoraPair {
  WeightMatrix a;  // [rank][in]
  WeightMatrix b;  // [out][rank]
  float scale = 1.0f;
  uint32_t rank() const { return static_cast<uint32_t>(a.rows); }
};

struct LoraAdapter {
  std::string source;  // path it was loaded from
  std::string format;  // "peft" or "gguf"
  uint32_t rank = 0;   // largest rank of its pairs
  float alpha = 0;
  std::vector<std::array<std::optional<LoraPair>, kLoraTargets>> layers;  // [n_layers]
  std::vector<std::shared_ptr<const void>> storage;  // mappings and copies the pairs point into

  const LoraPair* pair(uint32_t layer, LoraTarget t) const {
    const auto& p = layers[layer][static_cast<size_t>(t)];
    return p ? &*p : nullptr;
  }
  size_t weight_bytes() const;  // bytes of all A and B matrices
  std::string targets() const;  // "q_proj, v_proj" over the targets any layer has
};

// Every projection of a base model an adapter may change, with its names in both formats
// (without ".weight") and its [rows = out][cols = in] shape. Empty for families pith does not
// adapt (fused projections, experts).
struct LoraTargetTensor {
  uint32_t layer;
  LoraTarget target;
  std::string gguf, hf;  // "blk.3.attn_q", "model.layers.3.self_attn.q_proj"
  size_t rows, cols;
  bool rotary;  // HF stores its rows in split-half order (q/k of Llama-layout families)
};
std::vector<LoraTargetTensor> lora_target_tensors(const ModelConfig& base);

// Throws pith::Error (naming the adapter) when its layer count or any pair's shape does not fit
// `config`: every backend checks this in load_adapter.
void check_adapter_fits(const LoraAdapter& adapter, const ModelConfig& config);

// Loads the adapter at `path` (a PEFT folder or a GGUF file) for `base`. Throws pith::Error
// naming the file and the problem: not an adapter, another architecture, a tensor whose shape
// does not fit the base, a module pith does not adapt (embeddings, the LM head, fused
// projections, experts), DoRA, an unsupported dtype.
std::shared_ptr<const LoraAdapter> load_lora_adapter(const std::string& path,
                                                     const ModelWeights& base);

}  // namespace pith
