// The per-family description the loaders, the forward pass and `pith model gen` read (issue:
// "a small table of options and tensor names per architecture, one file per family").
//
// A family is a few data fields (its names in GGUF and config.json, which per-layer tensors it
// has and what Hugging Face calls them) and one function that sets its ModelConfig options
// from metadata keys it names in both formats. The shapes common to all families (layers,
// widths, heads, vocabulary, RoPE base and scaling) are read by the loaders themselves.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/model_config.h"

namespace pith {

// A metadata key as each format spells it: GGUF's is relative to "<architecture>." (empty when
// that format has no such key).
struct ArchKey {
  std::string_view gguf, hf;
};

// Read access to a model file's metadata for a family's options.
class ArchitectureKeys {
 public:
  virtual ~ArchitectureKeys() = default;
  virtual bool is_gguf() const = 0;
  virtual const std::string& source() const = 0;  // file named in errors
  virtual std::optional<double> number(ArchKey key) const = 0;
  virtual std::optional<bool> flag(ArchKey key) const = 0;
  // HF `layer_types` ("sliding_attention" / "full_attention" per layer), when present.
  virtual std::optional<std::vector<std::string>> layer_types() const = 0;
  // A per-layer array (GGUF arrays such as attention.head_count_kv, JSON lists); a single
  // number comes back as one entry.
  virtual std::optional<std::vector<double>> numbers(ArchKey key) const = 0;
  virtual std::optional<std::string> text(ArchKey key) const = 0;
  // GGUF: whether the file holds a tensor of this name (families whose layers may lack a
  // projection record that only by its absence). HF: always nullopt.
  virtual std::optional<bool> has_tensor(std::string_view gguf_name) const = 0;
};

// A value a generated model records for a family option (pith model gen).
struct ArchValue {
  ArchKey key;
  double number = 0;
  bool is_integer = false;
};

// Names of the per-layer tensors whose Hugging Face names differ between families.
struct HfLayerNames {
  std::string_view ffn_norm = "post_attention_layernorm";  // norm before the FFN
  std::string_view post_attn_norm = "";                    // norm of the attention output
  std::string_view post_ffn_norm = "";                     // norm of the FFN output
};

struct Architecture {
  std::string_view name;           // pith's name, `pith model gen --arch`
  std::string_view gguf_name;      // general.architecture of its GGUF files
  std::string_view hf_class;       // config.json architectures[0]
  std::string_view hf_model_type;  // config.json model_type
  // A multimodal class whose language model this family also loads (its `text_config` and
  // tensors under model.language_model.; the vision tower is ignored). Empty: none.
  std::string_view hf_multimodal_class = "";
  // Another class (and model_type) with the same layers and keys: Ministral for Mistral, which
  // transformers v5 also writes when it re-saves a Mistral config. Empty: none.
  std::string_view hf_sibling_class = "";
  std::string_view hf_sibling_model_type = "";
  // config.json values transformers' config class assumes where a file leaves them out (a JSON
  // object; published multimodal checkpoints carry sparse text_configs). Empty: none.
  std::string_view hf_config_defaults = "";
  HfLayerNames hf_names;
  std::string_view gguf_ffn_norm = "ffn_norm";  // GGUF name of the norm before the FFN
  bool fused_qkv = false;                       // one [q+2kv][d] projection (attn_qkv / qkv_proj)
  bool fused_gate_up =
      false;  // one [2 d_ff][d] projection, gate rows first (ffn_up / gate_up_proj)
  bool hf_norm_offset = false;  // HF stores norm weights as w - 1 (gemma); GGUF stores w
  bool partial_rotary = false;  // RoPE may turn only part of each head (rope_dim < head_dim)
  // Layers differ in attention shape (gemma4): GGUF files record key_length(_swa), per-layer
  // KV heads and FFN widths and the sliding layers as arrays.
  bool per_layer_attention = false;
  // Sets the family's options (rope style, biases, norms, windows, caps) on a config whose
  // common shapes are already read. Throws pith::Error for values pith does not implement.
  void (*configure)(ModelConfig& config, const ArchitectureKeys& keys) = nullptr;
  // The option values a generated model of this family records (inverse of configure).
  std::vector<ArchValue> (*describe)(const ModelConfig& config) = nullptr;
  // Loaded from GGUF only: its Hugging Face checkpoints store weights in a form pith's HF
  // loader does not read (gpt-oss's MXFP4 expert blocks); the error says how to convert.
  std::string_view hf_unsupported = "";
};

// Every supported family, llama first.
const std::vector<const Architecture*>& architectures();
const Architecture* find_architecture(std::string_view name);  // by pith name
const Architecture* architecture_for_gguf(std::string_view gguf_name);
const Architecture* architecture_for_hf(std::string_view hf_class, std::string_view model_type);
std::string supported_architecture_names();  // "llama, mistral, qwen2, ..."
std::string supported_hf_classes();          // "LlamaForCausalLM, ..."

// One tensor of a layer, in both formats' names, with its pith shape ([rows][cols], rows 1 for
// a vector). `rotary`: Q/K rows that HF Llama checkpoints store in split-half order.
struct LayerTensor {
  enum class Role {
    AttnNorm,
    Q,
    K,
    V,
    Qkv,
    QBias,
    KBias,
    VBias,
    QNorm,
    KNorm,
    AttnOut,
    PostAttnNorm,
    FfnNorm,
    Gate,
    Up,
    GateUp,
    Down,
    PostFfnNorm,
    Router,
    ExpertGate,
    ExpertUp,
    ExpertDown,
    SharedGate,
    SharedUp,
    SharedDown,
    SharedGateInp,
    // Gated DeltaNet (recurrent layers): [q|k|v] and z projections, per-head write strength
    // and decay inputs, conv kernel, decay bias and rate, gated output norm, output projection.
    SsmQkv,
    SsmGate,
    SsmBeta,
    SsmAlpha,
    SsmConv,
    SsmDtBias,
    SsmA,
    SsmNorm,
    SsmOut,
    LayerScale,  // a layer's output scalar (gemma4), one value
    // Per-layer token embeddings (gemma4 E2B/E4B): the gate from the residual stream, the
    // projection back to it and that projection's norm.
    PleGate,
    PleProj,
    PlePostNorm,
    // Experts beside the dense FFN (gemma4 26B-A4B): fused gate+up of each expert, the router
    // input's scale, each expert's output scale, and the norms around the two branches.
    ExpertGateUp,
    RouterScale,
    ExpertScale,
    PreFfnNorm2,
    PostFfnNorm1,
    PostFfnNorm2,
    // gpt-oss: the output projection's bias, the per-head attention sinks, the router's bias
    // and each expert's biases (a [experts][width] table per projection).
    AttnOutBias,
    AttnSinks,
    RouterBias,
    ExpertGateBias,
    ExpertUpBias,
    ExpertDownBias
  };
  Role role;
  std::string gguf, hf;  // full names for layer `layer`; an expert's HF name has "{}" for its index
  size_t rows, cols;
  bool is_norm = false;  // a norm weight vector (gemma's HF offset applies)
  bool rotary = false;
  // > 0: one [rows][cols] matrix per expert, stacked in one GGUF tensor (ggml dims {cols, rows,
  // experts}) and stored as separate tensors in HF checkpoints.
  uint32_t experts = 0;
  bool hf_row_vector = false;  // a vector HF stores as a [1][cols] matrix (shared_expert_gate)
  // Experts that HF also stacks in one [experts][rows][cols] tensor (gemma4), not one per expert.
  bool hf_stacked = false;
  // A convolution kernel, read into f32 whatever its dtype (GGUF dims {cols, rows}, HF shape
  // [rows][1][cols]).
  bool conv = false;
  // A small [rows][cols] table read into f32 values (gpt-oss's per-expert biases; GGUF dims
  // {cols, rows}).
  bool f32_table = false;
  bool hf_plain = false;      // a norm HF stores as is even where the family offsets its norms
  bool hf_log_decay = false;  // HF stores A_log; pith (like llama.cpp's GGUF) keeps -exp(A_log)
  // DeltaNet tensors indexed by value head: from row (or column, v_cols) v_first on, blocks of
  // v_block per value head. HF orders value heads by key head, pith and GGUF interleave them
  // (see hf_to_tiled_index); 0: not indexed by value head.
  size_t v_first = 0, v_block = 0;
  bool v_cols = false;
};

// Where HF's row/column i of a value-head-indexed tensor (LayerTensor::v_block) goes in pith's
// order. HF keeps the v_heads / k_heads value heads that share a key head together; llama.cpp's
// converter (and pith) interleave them so that value head h reads key head h % k_heads.
size_t hf_to_tiled_index(size_t i, size_t v_first, size_t v_block, const DeltaNetConfig& dn);

// The tensors of layer `layer` of a model of `arch` with `config`, in file order.
std::vector<LayerTensor> layer_tensors(const Architecture& arch, const ModelConfig& config,
                                       uint32_t layer);

// Shared option readers for families.
// A positive size (1..65536) the file must have; throws naming the key otherwise.
uint32_t required_size(const ArchitectureKeys& keys, ArchKey key);
// Llama-layout HF configs may ask for biases on every attention projection (attention_bias,
// o_proj included), which pith does not implement: refused by name instead of ignored.
void refuse_attention_bias(const ArchitectureKeys& keys);
// Sliding-window layers from HF layer_types if present, else every `pattern`-th layer is full
// (pattern 0: all layers slide). Leaves the window off when the window key is absent or 0.
void read_sliding_window(ModelConfig& c, const ArchitectureKeys& keys, ArchKey window_key,
                         uint32_t pattern);

}  // namespace pith
