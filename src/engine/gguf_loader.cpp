// GGUF -> ModelWeights. GGUF tensor dims are in ggml order (dims[0] = row length = in
// features), so a [out][in] matrix has dims {in, out}. Every tensor's shape and dtype is checked
// against the config before use, and the error names the tensor.
#include "engine/gguf_loader.h"

#include <fmt/ranges.h>

#include <chrono>
#include <limits>

#include "common/error.h"
#include "engine/kernels/matmul.h"
#include "engine/model_loader.h"

namespace pith {

namespace {

uint32_t get_u32(const GGUFFile& f, const std::string& key) {
  uint64_t v = f.get_uint(key);
  if (v > std::numeric_limits<uint32_t>::max())
    fail("{}: metadata '{}' = {} is too large", f.path(), key, v);
  return static_cast<uint32_t>(v);
}

uint32_t get_u32_or(const GGUFFile& f, const std::string& key, uint32_t fallback) {
  return f.has(key) ? get_u32(f, key) : fallback;
}

// A size that may be recorded per layer (gemma4's attention.head_count_kv and
// feed_forward_length): its value for layer 0 here; the family reads the whole array, and
// per_layer_sizes_match checks the config against it.
uint32_t first_layer_u32(const GGUFFile& f, const std::string& key, uint32_t fallback) {
  const GGUFValue* v = f.find(key);
  if (!v) return fallback;
  if (!std::holds_alternative<GGUFArray>(v->v)) return get_u32(f, key);
  std::vector<float> a = f.get_f32_array(key);
  if (a.empty() || !(a[0] >= 0) || a[0] > float(UINT32_MAX))
    fail("{}: metadata '{}' is an empty or invalid per-layer array", f.path(), key);
  return static_cast<uint32_t>(a[0]);
}

void per_layer_sizes_match(const GGUFFile& f, const std::string& key, const ModelConfig& c,
                           uint32_t (ModelConfig::*of)(uint32_t) const) {
  const GGUFValue* v = f.find(key);
  if (!v || !std::holds_alternative<GGUFArray>(v->v)) return;
  std::vector<float> a = f.get_f32_array(key);
  if (a.size() < c.n_layers)
    fail("{}: '{}' has {} entries for {} layers", f.path(), key, a.size(), c.n_layers);
  for (uint32_t l = 0; l < c.n_layers; ++l)
    if (a[l] != float((c.*of)(l)))
      fail(
          "{}: '{}' gives layer {} the size {}, which this architecture's layer kinds do not "
          "allow ({} expected)",
          f.path(), key, l, a[l], (c.*of)(l));
}

const GGUFTensorInfo& require_tensor(const GGUFFile& f, const std::string& name) {
  const GGUFTensorInfo* t = f.find_tensor(name);
  if (!t) fail("{}: missing tensor '{}'", f.path(), name);
  return *t;
}

// dims with trailing 1s dropped (ggml pads some vectors to rank 2+).
std::vector<uint64_t> squeezed(const std::vector<uint64_t>& dims) {
  std::vector<uint64_t> d = dims;
  while (d.size() > 1 && d.back() == 1) d.pop_back();
  return d;
}

// In place from the mapping. A file with general.alignment below the element size could leave a
// tensor misaligned for its type; such a tensor is copied once into an owned buffer.
// experts > 0: a stack of `experts` [rows][cols] matrices (ggml dims {cols, rows, experts}),
// returned as one [experts * rows][cols] matrix.
WeightMatrix matrix(const GGUFFile& f, ModelWeights& w, const std::string& name, size_t rows,
                    size_t cols, uint32_t experts = 0) {
  const GGUFTensorInfo& t = require_tensor(f, name);
  std::vector<uint64_t> want{cols, rows};
  if (experts > 0) want.push_back(experts);
  if (squeezed(t.dims) != want)
    fail("{}: tensor '{}' has shape [{}], expected [{}] (ggml order: in, out{})", f.path(), name,
         fmt::join(t.dims, ", "), fmt::join(want, ", "), experts ? ", expert" : "");
  WeightMatrix m{t.dtype, rows * std::max<size_t>(experts, 1), cols, t.data};
  size_t align = t.dtype == DType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) {
    auto buf = std::make_shared<std::vector<uint8_t>>(t.data, t.data + t.n_bytes);
    w.storage.push_back(buf);
    m.data = buf->data();
  }
  return m;
}

// A small [rows][cols] tensor (a convolution kernel) read into f32 values, rows after rows.
std::vector<float> table_f32(const GGUFFile& f, const std::string& name, size_t rows, size_t cols) {
  const GGUFTensorInfo& t = require_tensor(f, name);
  if (squeezed(t.dims) != std::vector<uint64_t>{cols, rows})
    fail("{}: tensor '{}' has shape [{}], expected [{}, {}]", f.path(), name,
         fmt::join(t.dims, ", "), cols, rows);
  std::vector<float> out(rows * cols);
  std::vector<uint8_t> aligned(t.data, t.data + t.n_bytes);
  const size_t rb = row_bytes(t.dtype, cols);
  for (size_t r = 0; r < rows; ++r)
    dequantize_row(t.dtype, aligned.data() + r * rb, out.data() + r * cols, cols);
  return out;
}

std::vector<float> vector_f32(const GGUFFile& f, const std::string& name, size_t n) {
  const GGUFTensorInfo& t = require_tensor(f, name);
  if (squeezed(t.dims) != std::vector<uint64_t>{n})
    fail("{}: tensor '{}' has shape [{}], expected [{}]", f.path(), name, fmt::join(t.dims, ", "),
         n);
  std::vector<float> out(n);
  std::vector<uint8_t> aligned(t.data, t.data + t.n_bytes);  // the mapping may be unaligned here
  dequantize_row(t.dtype, aligned.data(), out.data(), n);
  return out;
}

// A family's option keys, read from "<arch>.<key>" metadata.
class GgufKeys final : public ArchitectureKeys {
 public:
  GgufKeys(const GGUFFile& f, std::string prefix) : f_(f), prefix_(std::move(prefix)) {}
  bool is_gguf() const override { return true; }
  const std::string& source() const override { return f_.path(); }
  std::optional<double> number(ArchKey key) const override {
    if (key.gguf.empty() || !f_.has(prefix_ + std::string(key.gguf))) return std::nullopt;
    return f_.get_float(prefix_ + std::string(key.gguf));
  }
  std::optional<bool> flag(ArchKey key) const override {
    if (key.gguf.empty() || !f_.has(prefix_ + std::string(key.gguf))) return std::nullopt;
    return f_.get_bool_or(prefix_ + std::string(key.gguf), false);
  }
  // Layer kinds: hybrid models record theirs as a bool array (true: recurrent), gemma4 its
  // sliding layers (true: sliding window).
  std::optional<std::vector<std::string>> layer_types() const override {
    for (auto [key, yes] : {std::pair{"attention.recurrent_layers", "linear_attention"},
                            std::pair{"attention.sliding_window_pattern", "sliding_attention"}}) {
      const GGUFValue* v = f_.find(prefix_ + key);
      if (!v) continue;
      const GGUFArray* a = std::get_if<GGUFArray>(&v->v);
      if (!a && key == std::string_view("attention.sliding_window_pattern")) continue;  // gemma3: n
      if (!a || (a->elem_type != GGUFType::BOOL && a->elem_type != GGUFType::U8 &&
                 a->elem_type != GGUFType::I8))
        fail("{}: {}{} must be an array of booleans", f_.path(), prefix_, key);
      std::vector<std::string> out;
      for (uint64_t i = 0; i < a->count; ++i) out.push_back(a->data[i] ? yes : "full_attention");
      return out;
    }
    return std::nullopt;
  }
  std::optional<std::vector<double>> numbers(ArchKey key) const override {
    if (key.gguf.empty()) return std::nullopt;
    const std::string name = prefix_ + std::string(key.gguf);
    const GGUFValue* v = f_.find(name);
    if (!v) return std::nullopt;
    if (!std::holds_alternative<GGUFArray>(v->v)) return std::vector<double>{f_.get_float(name)};
    std::vector<float> a = f_.get_f32_array(name);
    return std::vector<double>(a.begin(), a.end());
  }
  std::optional<std::string> text(ArchKey key) const override {
    if (key.gguf.empty()) return std::nullopt;
    return f_.get_string_opt(prefix_ + std::string(key.gguf));
  }
  std::optional<bool> has_tensor(std::string_view name) const override {
    return f_.find_tensor(std::string(name)) != nullptr;
  }

 private:
  const GGUFFile& f_;
  std::string prefix_;
};

const Architecture& gguf_architecture(const GGUFFile& f) {
  const std::string name = f.get_string("general.architecture");
  const Architecture* arch = architecture_for_gguf(name);
  if (!arch)
    fail("{}: unsupported architecture '{}' (pith supports {})", f.path(), name,
         supported_architecture_names());
  return *arch;
}

}  // namespace

ModelConfig gguf_model_config(const GGUFFile& f) {
  ModelConfig c;
  const Architecture& arch = gguf_architecture(f);
  c.architecture = std::string(arch.name);
  const std::string p = std::string(arch.gguf_name) + ".";
  c.name = f.get_string_opt("general.name").value_or("");
  c.n_layers = get_u32(f, p + "block_count");
  // Multi-token-prediction blocks (Qwen3.5's converter appends them after the decoder layers and
  // counts them in block_count) are not part of the forward pass: their tensors stay unread.
  const uint32_t nextn = get_u32_or(f, p + "nextn_predict_layers", 0);
  if (nextn > 0 && nextn >= c.n_layers)
    fail("{}: {}nextn_predict_layers {} leaves no decoder layer of {}", f.path(), p, nextn,
         c.n_layers);
  c.n_layers -= nextn;
  c.d_model = get_u32(f, p + "embedding_length");
  c.d_ff = f.has(p + "feed_forward_length") ? first_layer_u32(f, p + "feed_forward_length", 0)
                                            : get_u32(f, p + "feed_forward_length");  // missing
  c.n_heads = get_u32(f, p + "attention.head_count");
  c.n_kv_heads = first_layer_u32(f, p + "attention.head_count_kv", c.n_heads);
  if (c.n_heads == 0) fail("{}: {}attention.head_count is 0", f.path(), p);
  c.head_dim = get_u32_or(f, p + "attention.key_length", c.d_model / c.n_heads);
  uint32_t v_len = get_u32_or(f, p + "attention.value_length", c.head_dim);
  if (v_len != c.head_dim)
    fail("{}: attention.value_length {} differs from key_length {} (unsupported)", f.path(), v_len,
         c.head_dim);
  uint32_t rope_dims = get_u32_or(f, p + "rope.dimension_count", c.head_dim);
  if (rope_dims != c.head_dim) {
    if (!arch.partial_rotary || rope_dims == 0 || rope_dims > c.head_dim || rope_dims % 2 != 0)
      fail("{}: partial rotary embedding (rope.dimension_count {} < head_dim {}) is not supported",
           f.path(), rope_dims, c.head_dim);
    c.rope_dim = rope_dims;
  }
  c.rms_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
  c.context_length = get_u32_or(f, p + "context_length", 2048);
  // llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank (a reranker's: not an embedding).
  switch (get_u32_or(f, p + "pooling_type", 0)) {
    case 1:
      c.pooling = "mean";
      break;
    case 2:
      c.pooling = "cls";
      break;
    case 3:
      c.pooling = "last";
      break;
    default:
      break;
  }

  if (f.has(p + "vocab_size")) {
    c.vocab_size = get_u32(f, p + "vocab_size");
  } else if (f.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<uint32_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  } else if (const auto* t = f.find_tensor("token_embd.weight"); t && t->dims.size() >= 2) {
    c.vocab_size = static_cast<uint32_t>(std::min<uint64_t>(t->dims[1], UINT32_MAX));
  }

  // Rope scaling: llama3-style factors live in rope_freqs.weight; plain linear scaling is a
  // constant factor (on top of rope_freqs where both are set); yarn as llama.cpp reads it:
  // factor, original context (default: the trained one), betas, and an attention factor that
  // multiplies the 1 + 0.1 ln factor temperature. Anything else is not implemented.
  if (f.find_tensor("rope_freqs.weight"))
    c.rope_freq_factors = vector_f32(f, "rope_freqs.weight", c.rotary_dim() / 2);
  const std::string scaling = f.get_string_opt(p + "rope.scaling.type").value_or("none");
  const float factor = static_cast<float>(f.get_float_or(p + "rope.scaling.factor", 1.0));
  if (scaling == "linear") {
    if (factor != 1.0f) {
      if (c.rope_freq_factors.empty()) c.rope_freq_factors.assign(c.rotary_dim() / 2, 1.0f);
      for (float& ff : c.rope_freq_factors) ff *= factor;
    }
  } else if (scaling == "yarn") {
    if (f.get_float_or(p + "rope.scaling.yarn_log_multiplier", 0.0) != 0.0)
      fail(
          "{}: yarn rope scaling with a log multiplier (DeepSeek's mscale_all_dim) is not "
          "supported",
          f.path());
    if (f.get_float_or(p + "rope.scaling.yarn_ext_factor", 1.0) != 1.0)
      fail("{}: yarn rope scaling with yarn_ext_factor other than 1 is not supported", f.path());
    YarnRope y;
    y.factor = factor;
    y.original_context =
        get_u32_or(f, p + "rope.scaling.original_context_length", c.context_length);
    y.beta_fast = static_cast<float>(f.get_float_or(p + "rope.scaling.yarn_beta_fast", 32.0));
    y.beta_slow = static_cast<float>(f.get_float_or(p + "rope.scaling.yarn_beta_slow", 1.0));
    y.mscale = static_cast<float>(f.get_float_or(p + "rope.scaling.attn_factor", 1.0)) *
               yarn_default_mscale(factor);
    c.yarn = y;
  } else if (scaling != "none" && scaling != "llama3") {
    fail("{}: rope scaling type '{}' is not supported", f.path(), scaling);
  }
  // LongRoPE (Phi-3.5, Phi-4-mini): two global factor tensors and the original context; a
  // rope_freqs tensor beside them wins, as in llama.cpp. Outside YaRN, rope.scaling.attn_factor
  // scales cos and sin (llama.cpp applies it to every model).
  if (f.find_tensor("rope_factors_long.weight")) {
    c.longrope.long_factors = vector_f32(f, "rope_factors_long.weight", c.rotary_dim() / 2);
    c.longrope.short_factors = vector_f32(f, "rope_factors_short.weight", c.rotary_dim() / 2);
    c.longrope.original_context =
        get_u32_or(f, p + "rope.scaling.original_context_length", c.context_length);
    if (c.rope_freq_factors.empty()) choose_longrope_factors(c);
  }
  if (scaling != "yarn")
    c.rope_attn_factor = static_cast<float>(f.get_float_or(p + "rope.scaling.attn_factor", 1.0));

  c.tied_output = f.find_tensor("output.weight") == nullptr;
  arch.configure(c, GgufKeys(f, p));
  validate_config(c, f.path());
  per_layer_sizes_match(f, p + "attention.head_count_kv", c, &ModelConfig::kv_heads_of);
  per_layer_sizes_match(f, p + "feed_forward_length", c, &ModelConfig::d_ff_of);
  return c;
}

std::shared_ptr<ModelWeights> load_gguf_model(const std::string& path, const LoadOptions& options) {
  auto file = std::make_shared<const GGUFFile>(path);
  const GGUFFile& f = *file;
  auto w = std::make_shared<ModelWeights>();
  w->config = gguf_model_config(f);
  w->source = path;
  w->format = "gguf";
  w->storage.push_back(file);
  const ModelConfig& c = w->config;

  w->token_embd = matrix(f, *w, "token_embd.weight", c.vocab_size, c.d_model);
  const Architecture& arch = *find_architecture(c.architecture);
  w->layers.resize(c.n_layers);
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = w->layers[i];
    for (const LayerTensor& t : layer_tensors(arch, c, i)) {
      if (t.experts > 0) {
        WeightMatrix stack = matrix(f, *w, t.gguf, t.rows, t.cols, t.experts);
        for (uint32_t e = 0; e < t.experts; ++e)
          place_layer_expert(l, t.role, e, {stack.dtype, t.rows, t.cols, stack.row(e * t.rows)}, c);
      } else if (t.conv || t.f32_table)
        place_layer_vector(l, t.role, table_f32(f, t.gguf, t.rows, t.cols), c);
      else if (t.rows == 1)
        place_layer_vector(l, t.role, vector_f32(f, t.gguf, t.cols), c);
      else
        place_layer_matrix(l, t.role, matrix(f, *w, t.gguf, t.rows, t.cols), c);
    }
    log_layer_progress(options, path, i, c.n_layers);
  }
  w->output_norm = vector_f32(f, "output_norm.weight", c.d_model);
  if (c.d_per_layer_input > 0) {
    const size_t all = size_t{c.n_layers} * c.d_per_layer_input;
    w->per_layer.token_embd = matrix(f, *w, "per_layer_token_embd.weight", c.vocab_size, all);
    w->per_layer.model_proj = matrix(f, *w, "per_layer_model_proj.weight", all, c.d_model);
    w->per_layer.proj_norm = vector_f32(f, "per_layer_proj_norm.weight", c.d_per_layer_input);
  }
  w->output =
      c.tied_output ? w->token_embd : matrix(f, *w, "output.weight", c.vocab_size, c.d_model);
  return w;
}

}  // namespace pith
