// Hugging Face folder -> ModelWeights (see hf_loader.h). safetensors shapes are row-major
// [out, in], matching WeightMatrix directly.
#include "engine/hf_loader.h"
#include "engine/model_loader.h"

#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/kernels/matmul.h"
#include "formats/safetensors.h"

namespace pith {

namespace fs = std::filesystem;
using nlohmann::json;

size_t hf_row_for_pith_row(size_t r, uint32_t hd) {
  size_t h = r / hd, j = r % hd;
  return h * hd + (j % 2 == 0 ? j / 2 : hd / 2 + j / 2);
}

size_t pith_row_for_hf_row(size_t r, uint32_t hd) {
  size_t h = r / hd, j = r % hd;
  return h * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
}

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  return j;
}

// Typed config.json accessors that name the file and key on a missing or mistyped value.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  uint32_t u32(const char* key) const {
    if (!has(key)) fail("{}: missing key '{}'", path_, key);
    return u32_of(j_[key], key);
  }
  uint32_t u32_or(const char* key, uint32_t fallback) const {
    return has(key) ? u32(key) : fallback;
  }
  float f32_or(const char* key, float fallback) const {
    return has(key) ? num(j_[key], key) : fallback;
  }
  bool bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail("{}: '{}' must be true or false", path_, key);
    return j_[key].get<bool>();
  }
  std::string str_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail("{}: '{}' must be a string", path_, key);
    return j_[key].get<std::string>();
  }

  uint32_t u32_of(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<uint32_t>::max())
      fail("{}: '{}' must be a non-negative integer", path_, key);
    return static_cast<uint32_t>(v.get<int64_t>());
  }
  float num(const json& v, const std::string& key) const {
    if (!v.is_number()) fail("{}: '{}' must be a number", path_, key);
    return v.get<float>();
  }

  const json& j_;
  std::string path_;
};

// All safetensors files of the checkpoint, and which one holds each tensor.
struct Checkpoint {
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> where;

  const SafetensorsTensor* find(const std::string& name) const {
    auto it = where.find(name);
    return it == where.end() ? nullptr : it->second->find(name);
  }
};

Checkpoint open_checkpoint(const std::string& folder) {
  Checkpoint ck;
  fs::path dir(folder);
  fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    json j = read_json(index.string());
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: missing 'weight_map' object", index.string());
    std::map<std::string, const SafetensorsFile*> by_file;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        fail("{}: weight_map['{}'] is not a file name", index.string(), it.key());
      std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        fail("{}: weight_map['{}'] = '{}' is not a file in the folder", index.string(), it.key(),
             shard);
      auto f = by_file.find(shard);
      if (f == by_file.end()) {
        ck.files.push_back(std::make_shared<const SafetensorsFile>((dir / shard).string()));
        f = by_file.emplace(shard, ck.files.back().get()).first;
      }
      if (!f->second->find(it.key()))
        fail("{}: tensor '{}' is listed in {} but not present there", (dir / shard).string(),
             it.key(), index.string());
      ck.where[it.key()] = f->second;
    }
  } else if (fs::exists(dir / "model.safetensors")) {
    ck.files.push_back(
        std::make_shared<const SafetensorsFile>((dir / "model.safetensors").string()));
    for (const auto& t : ck.files.back()->tensors()) ck.where[t.name] = ck.files.back().get();
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json", folder);
  }
  return ck;
}

class HfBuilder {
 public:
  // `prefix` replaces the leading "model." of the tensor names asked for (the language model of
  // a multimodal checkpoint lives under "model.language_model.").
  HfBuilder(const Checkpoint& ck, ModelWeights& w, std::string prefix)
      : ck_(ck), w_(w), prefix_(std::move(prefix)) {}

  const SafetensorsTensor& tensor(const std::string& hf_name, std::vector<uint64_t> shape) {
    const std::string name = hf_name.starts_with("model.") ? prefix_ + hf_name.substr(6)
                             : hf_name.starts_with("lm_head.") && prefix_ == "language_model.model."
                                 ? "language_model." + hf_name
                                 : hf_name;
    const SafetensorsTensor* t = ck_.find(name);
    if (!t) fail("{}: missing tensor '{}'", w_.source, name);
    const std::string file = ck_.where.at(name)->path();
    if (t->shape != shape)
      fail("{}: tensor '{}' has shape [{}], expected [{}]", file, name, fmt::join(t->shape, ", "),
           fmt::join(shape, ", "));
    if (!t->dtype)
      fail("{}: tensor '{}' has unsupported dtype {} (pith reads F32, F16, BF16)", file, name,
           t->dtype_name);
    return *t;
  }

  // In place when the data is aligned for its element type, else one copy.
  WeightMatrix matrix(const std::string& name, size_t rows, size_t cols) {
    const SafetensorsTensor& t = tensor(name, {rows, cols});
    WeightMatrix m{*t.dtype, rows, cols, t.data};
    size_t align = dtype_info(m.dtype).block_bytes;
    if (reinterpret_cast<uintptr_t>(t.data) % align != 0) m.data = own_copy(t.data, t.n_bytes);
    return m;
  }

  // `experts` [rows][cols] matrices stacked in one [experts][rows][cols] tensor, as one
  // [experts * rows][cols] matrix (in place where aligned).
  WeightMatrix stacked_matrix(const std::string& name, uint32_t experts, size_t rows, size_t cols) {
    const SafetensorsTensor& t = tensor(name, {experts, rows, cols});
    WeightMatrix m{*t.dtype, size_t{experts} * rows, cols, t.data};
    size_t align = dtype_info(m.dtype).block_bytes;
    if (reinterpret_cast<uintptr_t>(t.data) % align != 0) m.data = own_copy(t.data, t.n_bytes);
    return m;
  }

  // Q/K rows reordered from HF split-half to pith's adjacent-pair rotary layout (one copy).
  WeightMatrix rotary_matrix(const std::string& name, size_t rows, size_t cols, uint32_t head_dim) {
    const SafetensorsTensor& t = tensor(name, {rows, cols});
    WeightMatrix m{*t.dtype, rows, cols, nullptr};
    size_t rb = m.row_bytes();
    auto buf = std::make_shared<std::vector<uint8_t>>(t.n_bytes);
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(buf->data() + r * rb, t.data + hf_row_for_pith_row(r, head_dim) * rb, rb);
    m.data = buf->data();
    w_.storage.push_back(buf);
    return m;
  }

  // A DeltaNet matrix indexed by value head (LayerTensor::v_block), copied once into pith's
  // value-head order (hf_to_tiled_index): HF row (column) i becomes row (column) index(i).
  WeightMatrix value_head_matrix(const LayerTensor& lt, const DeltaNetConfig& dn) {
    const SafetensorsTensor& t = tensor(lt.hf, {lt.rows, lt.cols});
    WeightMatrix m{*t.dtype, lt.rows, lt.cols, nullptr};
    const size_t rb = m.row_bytes(), es = rb / lt.cols;
    auto buf = std::make_shared<std::vector<uint8_t>>(t.n_bytes);
    for (size_t r = 0; r < lt.rows; ++r) {
      const uint8_t* src = t.data + r * rb;
      if (!lt.v_cols) {
        std::memcpy(buf->data() + hf_to_tiled_index(r, lt.v_first, lt.v_block, dn) * rb, src, rb);
        continue;
      }
      for (size_t i = 0; i < lt.cols; ++i)
        std::memcpy(buf->data() + r * rb + hf_to_tiled_index(i, lt.v_first, lt.v_block, dn) * es,
                    src + i * es, es);
    }
    m.data = buf->data();
    w_.storage.push_back(buf);
    return m;
  }
  // A convolution kernel stored [rows][1][cols], in f32 rows after rows.
  std::vector<float> conv_f32(const std::string& name, size_t rows, size_t cols) {
    const SafetensorsTensor& t = tensor(name, {rows, 1, cols});
    std::vector<float> out(rows * cols);
    std::vector<uint8_t> tmp(t.data, t.data + t.n_bytes);
    dequantize_row(*t.dtype, tmp.data(), out.data(), rows * cols);
    return out;
  }
  std::vector<float> vector_f32(const std::string& name, size_t n, bool as_row = false) {
    const SafetensorsTensor& t =
        tensor(name, as_row ? std::vector<uint64_t>{1, n} : std::vector<uint64_t>{n});
    std::vector<float> out(n);
    std::vector<uint8_t> tmp(t.data, t.data + t.n_bytes);  // dequantize_row wants aligned input
    dequantize_row(*t.dtype, tmp.data(), out.data(), n);
    return out;
  }

 private:
  const void* own_copy(const uint8_t* data, size_t n) {
    auto buf = std::make_shared<std::vector<uint8_t>>(data, data + n);
    w_.storage.push_back(buf);
    return buf->data();
  }

  const Checkpoint& ck_;
  ModelWeights& w_;
  std::string prefix_;
};

// A family's option keys, read from config.json (null counts as absent).
class HfKeys final : public ArchitectureKeys {
 public:
  HfKeys(const json& j, std::string path, std::set<std::string>* looked_up = nullptr)
      : j_(j), path_(std::move(path)), looked_up_(looked_up) {}
  bool is_gguf() const override { return false; }
  const std::string& source() const override { return path_; }
  std::optional<double> number(ArchKey key) const override {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail("{}: '{}' must be a number", path_, key.hf);
    return v->get<double>();
  }
  std::optional<bool> flag(ArchKey key) const override {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail("{}: '{}' must be true or false", path_, key.hf);
    return v->get<bool>();
  }
  std::optional<std::vector<std::string>> layer_types() const override {
    const json* v = find({"", "layer_types"});
    if (!v) return std::nullopt;
    std::vector<std::string> out;
    if (v->is_array())
      for (const json& e : *v)
        if (e.is_string()) out.push_back(e.get<std::string>());
    if (!v->is_array() || out.size() != v->size())
      fail("{}: 'layer_types' must be a list of strings", path_);
    return out;
  }
  std::optional<std::vector<double>> numbers(ArchKey key) const override {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number()) return std::vector<double>{v->get<double>()};
    std::vector<double> out;
    if (v->is_array())
      for (const json& e : *v)
        if (e.is_number()) out.push_back(e.get<double>());
    if (!v->is_array() || out.size() != v->size())
      fail("{}: '{}' must be a number or a list of numbers", path_, key.hf);
    return out;
  }
  std::optional<std::string> text(ArchKey key) const override {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail("{}: '{}' must be a string", path_, key.hf);
    return v->get<std::string>();
  }
  std::optional<bool> has_tensor(std::string_view) const override { return std::nullopt; }

 private:
  // key.hf may name a nested value with dots ("rope_parameters.full_attention.rope_theta").
  const json* find(ArchKey key) const {
    if (key.hf.empty()) return nullptr;
    if (looked_up_) looked_up_->insert(std::string(key.hf.substr(0, key.hf.find('.'))));
    const json* at = &j_;
    std::string_view rest = key.hf;
    while (!rest.empty()) {
      const size_t dot = rest.find('.');
      const std::string part(rest.substr(0, dot));
      rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
      if (!at->is_object()) return nullptr;
      auto it = at->find(part);
      if (it == at->end() || it->is_null()) return nullptr;
      at = &*it;
    }
    return at;
  }
  const json& j_;
  std::string path_;
  std::set<std::string>* looked_up_;
};

}  // namespace

std::unique_ptr<ArchitectureKeys> hf_config_keys(const json& config, std::string path,
                                                 std::set<std::string>* looked_up) {
  return std::make_unique<HfKeys>(config, std::move(path), looked_up);
}

namespace {

// A folder's model configuration, and where its language model's tensors are: "model." for a
// *ForCausalLM checkpoint, "model.language_model." for the text part of a multimodal one.
struct HfConfig {
  ModelConfig config;
  std::string prefix = "model.";
};

// An embedding checkpoint saved by sentence-transformers says how it pools in
// 1_Pooling/config.json (pooling_mode_lasttoken / _mean_tokens / _cls_token); "" without one.
std::string sentence_transformers_pooling(const std::string& folder) {
  const std::string path = (fs::path(folder) / "1_Pooling" / "config.json").string();
  if (!fs::exists(path)) return "";
  const json j = read_json(path);
  auto on = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
  };
  if (on("pooling_mode_lasttoken")) return "last";
  if (on("pooling_mode_mean_tokens")) return "mean";
  if (on("pooling_mode_cls_token")) return "cls";
  return "";
}

HfConfig read_hf_config(const std::string& folder) {
  const std::string path = (fs::path(folder) / "config.json").string();
  if (!fs::exists(path)) fail("{}: not a Hugging Face model folder (no config.json)", folder);
  const json top = read_json(path);
  ConfigReader top_reader(top, path);
  std::string arch;
  if (top_reader.has("architectures")) {
    if (!top["architectures"].is_array() || top["architectures"].empty() ||
        !top["architectures"][0].is_string())
      fail("{}: 'architectures' must be a list of names", path);
    arch = top["architectures"][0].get<std::string>();
  }
  std::string model_type = top_reader.str_or("model_type", "");
  const Architecture* family = architecture_for_hf(arch, model_type);
  if (!family)
    fail("{}: unsupported architecture '{}' (pith supports {})", path,
         arch.empty() ? model_type : arch, supported_hf_classes());
  if (!family->hf_unsupported.empty())
    fail("{}: {} Hugging Face checkpoints are not supported: {}", path, family->name,
         family->hf_unsupported);
  HfConfig out;
  const json* text = &top;
  if (!arch.empty() && arch == family->hf_multimodal_class) {
    // The language model of a multimodal checkpoint: its own config, its own tensor names;
    // the vision tower is not loaded.
    if (!top.contains("text_config") || !top["text_config"].is_object())
      fail("{}: '{}' without a 'text_config' object", path, arch);
    text = &top["text_config"];
    out.prefix = "model.language_model.";
  }
  // transformers v5 writes gemma2/3's RoPE per layer type: rope_parameters = {full_attention:
  // {rope_theta, rope_type, factor...}, sliding_attention: {rope_theta, ...}}. Read as the v4 keys
  // (rope_theta, rope_scaling, rope_local_base_freq) so the family defaults below do not stand
  // in for them (Gemma 3 4B+ would lose its linear factor 8). gemma4 reads the nested keys itself.
  json flattened;
  if (!family->per_layer_attention && text->contains("rope_parameters") &&
      (*text)["rope_parameters"].is_object() &&
      (*text)["rope_parameters"].contains("full_attention")) {
    flattened = *text;
    const json rp = flattened["rope_parameters"];
    flattened.erase("rope_parameters");
    const json& full = rp["full_attention"];
    if (!full.is_object()) fail("{}: rope_parameters.full_attention must be an object", path);
    if (full.contains("rope_theta") && !flattened.contains("rope_theta"))
      flattened["rope_theta"] = full["rope_theta"];
    if (full.value("rope_type", "default") != "default" && !flattened.contains("rope_scaling"))
      flattened["rope_scaling"] = full;
    if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object() &&
        rp["sliding_attention"].contains("rope_theta") &&
        !flattened.contains("rope_local_base_freq"))
      flattened["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"];
    text = &flattened;
  }
  json with_defaults;
  if (!family->hf_config_defaults.empty()) {  // what the file leaves out, as transformers assumes
    with_defaults = *text;
    const json defaults = json::parse(family->hf_config_defaults);
    for (const auto& [key, value] : defaults.items())
      if (!with_defaults.contains(key)) with_defaults[key] = value;
    text = &with_defaults;
  }
  const json& j = *text;
  ConfigReader r(j, path);
  ModelConfig& c = out.config;
  c.architecture = std::string(family->name);
  c.name = fs::path(folder).filename().string();
  if (c.name.empty()) c.name = fs::path(folder).parent_path().filename().string();
  c.n_layers = r.u32("num_hidden_layers");
  c.d_model = r.u32("hidden_size");
  c.d_ff = r.u32("intermediate_size");
  c.n_heads = r.u32("num_attention_heads");
  c.n_kv_heads = r.u32_or("num_key_value_heads", c.n_heads);
  if (c.n_heads == 0) fail("{}: 'num_attention_heads' is 0", path);
  c.head_dim = r.u32_or("head_dim", c.d_model / c.n_heads);
  c.vocab_size = r.u32("vocab_size");
  c.context_length = r.u32_or("max_position_embeddings", 2048);
  c.rms_eps = r.f32_or("rms_norm_eps", 1e-6f);
  // Newer configs keep the RoPE settings in `rope_parameters`; text-only positions make the
  // multimodal "mrope" layouts (Qwen3.5) ordinary RoPE.
  const json* rope_params = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                ? &j["rope_parameters"]
                                : nullptr;
  auto rope_value = [&](const char* key, float fallback) {
    if (r.has(key)) return r.f32_or(key, fallback);
    if (rope_params)
      return ConfigReader(*rope_params, path + " rope_parameters").f32_or(key, fallback);
    return fallback;
  };
  c.rope_theta = rope_value("rope_theta", 10000.0f);
  // Scaling from `rope_scaling`, or from transformers v5's `rope_parameters`, which hold the
  // same keys (rope_type, factor, original_max_position_embeddings, ...).
  const json* scaling_src = r.has("rope_scaling") ? &j["rope_scaling"] : nullptr;
  if (rope_params && !scaling_src) {
    ConfigReader pr(*rope_params, path + " rope_parameters");
    const std::string type = pr.str_or("rope_type", "default");
    if (type != "default" && type != "mrope") scaling_src = rope_params;
  }
  const float partial = rope_value("partial_rotary_factor", 1.0f);
  if (partial != 1.0f) {
    const float dims = partial * static_cast<float>(c.head_dim);
    if (!family->partial_rotary || !(partial > 0 && partial < 1) ||
        dims != static_cast<float>(static_cast<uint32_t>(dims)) ||
        static_cast<uint32_t>(dims) % 2 != 0)
      fail("{}: partial_rotary_factor {} is not supported for {}", path, partial, family->name);
    c.rope_dim = static_cast<uint32_t>(dims);
  }
  c.tied_output = r.has("tie_word_embeddings") ? r.bool_or("tie_word_embeddings", false)
                                               : top_reader.bool_or("tie_word_embeddings", false);
  // No family pith runs has FFN biases; their tensors would otherwise be ignored.
  if (r.bool_or("mlp_bias", false))
    fail("{}: mlp_bias = true (biases on the FFN projections) is not supported", path);
  if (scaling_src) {
    nlohmann::json scaling = *scaling_src;
    // Phi-3 keeps LongRoPE's original context at the top level.
    if (scaling.is_object() && !scaling.contains("original_max_position_embeddings") &&
        j.contains("original_max_position_embeddings"))
      scaling["original_max_position_embeddings"] = j["original_max_position_embeddings"];
    apply_rope_scaling(c, scaling, path);
  }
  family->configure(c, HfKeys(j, path));
  validate_config(c, path);
  c.pooling = sentence_transformers_pooling(folder);
  return out;
}

}  // namespace

ModelConfig hf_model_config(const std::string& folder) {
  return read_hf_config(folder).config;
}

std::shared_ptr<ModelWeights> load_hf_model(const std::string& folder, const LoadOptions& options) {
  auto w = std::make_shared<ModelWeights>();
  HfConfig hc = read_hf_config(folder);
  w->config = std::move(hc.config);
  w->source = folder;
  w->format = "hf";
  Checkpoint ck = open_checkpoint(folder);
  for (const auto& f : ck.files) w->storage.push_back(f);
  ModelConfig& c = w->config;
  // Multimodal checkpoints written before transformers 4.52 keep the language model under
  // language_model.model. (and its head under language_model.lm_head.).
  if (hc.prefix == "model.language_model." &&
      !ck.find("model.language_model.embed_tokens.weight") &&
      ck.find("language_model.model.embed_tokens.weight"))
    hc.prefix = "language_model.model.";
  HfBuilder b(ck, *w, hc.prefix);

  w->token_embd = b.matrix("model.embed_tokens.weight", c.vocab_size, c.d_model);
  const Architecture& family = *find_architecture(c.architecture);
  // Gemma's HF norms hold w - 1; pith (like GGUF) keeps the weight the norm multiplies by.
  auto norm = [&](const std::string& name, size_t n, bool plain = false) {
    std::vector<float> v = b.vector_f32(name, n);
    if (family.hf_norm_offset && !plain)
      for (float& x : v) x += 1.0f;
    return v;
  };
  // DeltaNet tensors in pith's value-head order (a copy, only where the orders differ).
  const bool reorder_value_heads = c.delta_net.v_heads != c.delta_net.k_heads;
  auto value_head_rows = [&](std::vector<float> v, const LayerTensor& t) {
    if (t.v_block == 0 || !reorder_value_heads) return v;
    const size_t row = t.rows == 1 ? 1 : t.cols;  // vectors: one value per "row"
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size() / row; ++i)
      std::copy_n(v.begin() + i * row, row,
                  out.begin() + hf_to_tiled_index(i, t.v_first, t.v_block, c.delta_net) * row);
    return out;
  };
  w->layers.resize(c.n_layers);
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = w->layers[i];
    for (const LayerTensor& t : layer_tensors(family, c, i)) {
      if (t.experts > 0 && t.hf_stacked) {
        const WeightMatrix all = b.stacked_matrix(t.hf, t.experts, t.rows, t.cols);
        for (uint32_t e = 0; e < t.experts; ++e)
          place_layer_expert(l, t.role, e, {all.dtype, t.rows, t.cols, all.row(e * t.rows)}, c);
      } else if (t.experts > 0)
        for (uint32_t e = 0; e < t.experts; ++e)
          place_layer_expert(l, t.role, e,
                             b.matrix(fmt::format(fmt::runtime(t.hf), e), t.rows, t.cols), c);
      else if (t.conv)
        place_layer_vector(l, t.role, value_head_rows(b.conv_f32(t.hf, t.rows, t.cols), t), c);
      else if (t.rows == 1) {
        std::vector<float> v = t.is_norm ? norm(t.hf, t.cols, t.hf_plain)
                                         : b.vector_f32(t.hf, t.cols, t.hf_row_vector);
        if (t.hf_log_decay)
          for (float& x : v) x = -std::exp(x);
        place_layer_vector(l, t.role, value_head_rows(std::move(v), t), c);
      } else if (t.v_block > 0 && reorder_value_heads)
        place_layer_matrix(l, t.role, b.value_head_matrix(t, c.delta_net), c);
      else if (t.rotary)
        place_layer_matrix(l, t.role, b.rotary_matrix(t.hf, t.rows, t.cols, c.head_dim), c);
      else
        place_layer_matrix(l, t.role, b.matrix(t.hf, t.rows, t.cols), c);
    }
    log_layer_progress(options, folder, i, c.n_layers);
  }
  w->output_norm = norm("model.norm.weight", c.d_model);
  if (c.d_per_layer_input > 0) {
    const size_t all = size_t{c.n_layers} * c.d_per_layer_input;
    w->per_layer.token_embd = b.matrix("model.embed_tokens_per_layer.weight", c.vocab_size, all);
    w->per_layer.model_proj = b.matrix("model.per_layer_model_projection.weight", all, c.d_model);
    w->per_layer.proj_norm = norm("model.per_layer_projection_norm.weight", c.d_per_layer_input);
  }
  if (c.tied_output) {
    w->output = w->token_embd;
  } else if (ck.find("lm_head.weight") || ck.find("language_model.lm_head.weight")) {
    w->output = b.matrix("lm_head.weight", c.vocab_size, c.d_model);
  } else {
    fail("{}: missing tensor 'lm_head.weight' (and tie_word_embeddings is false)", folder);
  }
  return w;
}

}  // namespace pith
