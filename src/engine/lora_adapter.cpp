// Loading LoRA adapters from PEFT folders and GGUF files (engine/lora_adapter.h). The base
// model's per-layer tensor table (engine/architectures) names each target in both formats, so
// the loaders map names through it instead of keeping their own lists.
#include "engine/lora_adapter.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/read_file.h"
#include "engine/hf_loader.h"
#include "engine/model_weights.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

namespace pith {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* lora_target_name(LoraTarget t) {
  static const char* const names[kLoraTargets] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"};
  return names[static_cast<size_t>(t)];
}

size_t LoraAdapter::weight_bytes() const {
  size_t n = 0;
  for (const auto& layer : layers)
    for (const auto& p : layer)
      if (p) n += p->a.rows * p->a.row_bytes() + p->b.rows * p->b.row_bytes();
  return n;
}

std::string LoraAdapter::targets() const {
  std::vector<std::string> names;
  for (size_t t = 0; t < kLoraTargets; ++t)
    for (const auto& layer : layers)
      if (layer[t]) {
        names.push_back(lora_target_name(static_cast<LoraTarget>(t)));
        break;
      }
  return fmt::format("{}", fmt::join(names, ", "));
}

namespace {

std::optional<LoraTarget> target_of(LayerTensor::Role role) {
  using R = LayerTensor::Role;
  switch (role) {
    case R::Q:
      return LoraTarget::Q;
    case R::K:
      return LoraTarget::K;
    case R::V:
      return LoraTarget::V;
    case R::AttnOut:
      return LoraTarget::O;
    case R::Gate:
      return LoraTarget::Gate;
    case R::Up:
      return LoraTarget::Up;
    case R::Down:
      return LoraTarget::Down;
    default:
      return std::nullopt;
  }
}

// Base tensor name in one format -> its target.
std::map<std::string, LoraTargetTensor> target_slots(const ModelWeights& base, bool gguf) {
  std::map<std::string, LoraTargetTensor> slots;
  for (LoraTargetTensor& t : lora_target_tensors(base.config)) {
    std::string name = gguf ? t.gguf : t.hf;
    slots.emplace(std::move(name), std::move(t));
  }
  return slots;
}

// A copy of `m`'s rows in `order` (or as they are), owned by the adapter: the mapping may be
// misaligned for the dtype, and PEFT's q/k B rows need pith's rotary order.
WeightMatrix owned(LoraAdapter& ad, WeightMatrix m, const std::vector<size_t>* order = nullptr) {
  const size_t rb = m.row_bytes();
  auto buf = std::make_shared<std::vector<uint8_t>>(m.rows * rb);
  for (size_t r = 0; r < m.rows; ++r)
    std::memcpy(buf->data() + r * rb, m.row(order ? (*order)[r] : r), rb);
  m.data = buf->data();
  ad.storage.push_back(buf);
  return m;
}

void check_dtype(const std::string& file, const std::string& name, DType dtype, size_t cols) {
  const size_t block = dtype_info(dtype).block_size;
  if (cols % block != 0)
    fail("{}: tensor '{}' is {} with rows of {} elements, not a multiple of its block size {}",
         file, name, dtype_info(dtype).name, cols, block);
}

void finish(LoraAdapter& ad, const std::string& path, size_t n_pairs) {
  if (n_pairs == 0) fail("{}: the adapter has no LoRA tensors", path);
  for (const auto& layer : ad.layers)
    for (const auto& p : layer)
      if (p) ad.rank = std::max(ad.rank, p->rank());
}

// ---- Hugging Face PEFT ------------------------------------------------------------------------

std::shared_ptr<const LoraAdapter> load_peft(const std::string& folder, const ModelWeights& base) {
  const std::string config_path = (fs::path(folder) / "adapter_config.json").string();
  const std::string weights_path = (fs::path(folder) / "adapter_model.safetensors").string();
  if (!fs::exists(config_path))
    fail(
        "{}: not a LoRA adapter (no adapter_config.json; pith reads PEFT folders and GGUF "
        "adapters)",
        folder);
  if (!fs::exists(weights_path))
    fail(
        "{}: no adapter_model.safetensors (pickled adapter_model.bin is not read; save with "
        "safe_serialization=True)",
        folder);
  json cfg = json::parse(read_file(config_path), nullptr, false);
  if (!cfg.is_object()) fail("{}: not valid JSON", config_path);
  auto str = [&](const char* key) {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&](const char* key) {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_boolean() && it->get<bool>();
  };
  if (std::string type = str("peft_type"); type != "LORA")
    fail("{}: peft_type '{}' is not a LoRA adapter", config_path, type);
  if (flag("use_dora")) fail("{}: DoRA adapters (use_dora) are not supported", config_path);
  if (auto it = cfg.find("alpha_pattern"); it != cfg.end() && it->is_object() && !it->empty())
    fail("{}: per-module alpha (alpha_pattern) is not supported", config_path);
  if (auto it = cfg.find("modules_to_save"); it != cfg.end() && it->is_array() && !it->empty())
    fail("{}: modules_to_save ({}) would replace base weights; pith applies LoRA deltas only",
         config_path, it->dump());
  auto alpha_it = cfg.find("lora_alpha");
  if (alpha_it == cfg.end() || !alpha_it->is_number())
    fail("{}: lora_alpha is missing or not a number", config_path);
  const double alpha = alpha_it->get<double>();
  const bool rslora = flag("use_rslora");

  SafetensorsFile file(weights_path);
  auto ad = std::make_shared<LoraAdapter>();
  ad->source = folder;
  ad->format = "peft";
  ad->alpha = static_cast<float>(alpha);
  ad->layers.resize(base.config.n_layers);
  const auto slots = target_slots(base, /*gguf=*/false);
  // PEFT names: base_model.model.<module>.lora_A.weight (and lora_B); the adapter's own name
  // ("default") is stripped when saved.
  struct Half {
    const SafetensorsTensor* a = nullptr;
    const SafetensorsTensor* b = nullptr;
  };
  std::map<std::string, Half> halves;
  for (const SafetensorsTensor& t : file.tensors()) {
    std::string name = t.name;
    const std::string prefix = "base_model.model.";
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
    const bool is_a = name.ends_with(".lora_A.weight"), is_b = name.ends_with(".lora_B.weight");
    if (!is_a && !is_b)
      fail(
          "{}: tensor '{}' is not a LoRA A/B matrix (embeddings, biases and saved modules are "
          "not supported)",
          weights_path, t.name);
    std::string module = name.substr(0, name.size() - std::string_view(".lora_A.weight").size());
    if (!slots.count(module))
      fail(
          "{}: tensor '{}' adapts '{}', which this {} base has no adaptable projection for "
          "(pith adapts q/k/v/o and gate/up/down projections of unfused, dense layers)",
          weights_path, t.name, module, base.config.architecture);
    (is_a ? halves[module].a : halves[module].b) = &t;
  }
  size_t n_pairs = 0;
  for (const auto& [module, half] : halves) {
    if (!half.a || !half.b)
      fail("{}: '{}' has lora_{} but not lora_{}", weights_path, module, half.a ? "A" : "B",
           half.a ? "B" : "A");
    const LoraTargetTensor& slot = slots.at(module);
    for (const SafetensorsTensor* t : {half.a, half.b})
      if (!t->dtype || t->shape.size() != 2)
        fail("{}: tensor '{}' must be a 2-D F32, F16 or BF16 matrix (is {} [{}])", weights_path,
             t->name, t->dtype_name, fmt::join(t->shape, ", "));
    const size_t rank = half.a->shape[0];
    if (rank == 0 || half.a->shape[1] != slot.cols || half.b->shape[0] != slot.rows ||
        half.b->shape[1] != rank)
      fail(
          "{}: '{}' has lora_A [{}] and lora_B [{}]; the base's {} is [{}, {}] (another base "
          "model?)",
          weights_path, module, fmt::join(half.a->shape, ", "), fmt::join(half.b->shape, ", "),
          module, slot.rows, slot.cols);
    LoraPair p;
    p.a = owned(*ad, WeightMatrix{*half.a->dtype, rank, slot.cols, half.a->data});
    WeightMatrix b{*half.b->dtype, slot.rows, rank, half.b->data};
    if (slot.rotary) {
      std::vector<size_t> order(slot.rows);
      for (size_t r = 0; r < slot.rows; ++r)
        order[r] = hf_row_for_pith_row(r, base.config.head_dim);
      p.b = owned(*ad, b, &order);
    } else {
      p.b = owned(*ad, b);
    }
    p.scale = static_cast<float>(rslora ? alpha / std::sqrt(double(rank)) : alpha / double(rank));
    ad->layers[slot.layer][static_cast<size_t>(slot.target)] = p;
    ++n_pairs;
  }
  finish(*ad, folder, n_pairs);
  return ad;
}

// ---- llama.cpp GGUF LoRA ----------------------------------------------------------------------

std::shared_ptr<const LoraAdapter> load_gguf_lora(const std::string& path,
                                                  const ModelWeights& base) {
  GGUFFile f(path);
  const std::string type = f.get_string_opt("general.type").value_or("");
  if (type != "adapter")
    fail("{}: not an adapter (general.type is '{}'; a LoRA GGUF has 'adapter')", path, type);
  if (std::string at = f.get_string_opt("adapter.type").value_or(""); at != "lora")
    fail("{}: adapter.type '{}' is not supported (only 'lora')", path, at);
  const Architecture* arch = find_architecture(base.config.architecture);
  PITH_CHECK(arch != nullptr);
  const std::string file_arch = f.get_string_opt("general.architecture").value_or("");
  if (file_arch != arch->gguf_name)
    fail("{}: the adapter is for architecture '{}', the base model is '{}'", path, file_arch,
         arch->gguf_name);
  const double alpha = f.get_float_or("adapter.lora.alpha", 0.0);

  auto ad = std::make_shared<LoraAdapter>();
  ad->source = path;
  ad->format = "gguf";
  ad->alpha = static_cast<float>(alpha);
  ad->layers.resize(base.config.n_layers);
  const auto slots = target_slots(base, /*gguf=*/true);
  std::map<std::string, std::pair<const GGUFTensorInfo*, const GGUFTensorInfo*>> halves;
  for (const GGUFTensorInfo& t : f.tensors()) {
    const bool is_a = t.name.ends_with(".weight.lora_a"), is_b = t.name.ends_with(".weight.lora_b");
    if (!is_a && !is_b) fail("{}: tensor '{}' is not a LoRA A/B matrix", path, t.name);
    std::string base_name =
        t.name.substr(0, t.name.size() - std::string_view(".weight.lora_a").size());
    if (!slots.count(base_name))
      fail(
          "{}: tensor '{}' adapts '{}', which this {} base has no adaptable projection for "
          "(pith adapts q/k/v/o and gate/up/down projections of unfused, dense layers)",
          path, t.name, base_name + ".weight", base.config.architecture);
    (is_a ? halves[base_name].first : halves[base_name].second) = &t;
  }
  size_t n_pairs = 0;
  for (const auto& [name, half] : halves) {
    const auto [a, b] = half;
    if (!a || !b)
      fail("{}: '{}.weight' has lora_{} but not lora_{}", path, name, a ? "a" : "b", a ? "b" : "a");
    const LoraTargetTensor& slot = slots.at(name);
    // ggml order: lora_a {in, rank}, lora_b {rank, out}.
    if (a->dims.size() != 2 || b->dims.size() != 2 || a->dims[0] != slot.cols ||
        b->dims[1] != slot.rows || a->dims[1] != b->dims[0] || a->dims[1] == 0)
      fail(
          "{}: '{}.weight' has lora_a [{}] and lora_b [{}] (ggml order); the base tensor is "
          "[{}, {}] (another base model?)",
          path, name, fmt::join(a->dims, ", "), fmt::join(b->dims, ", "), slot.cols, slot.rows);
    const size_t rank = a->dims[1];
    check_dtype(path, a->name, a->dtype, slot.cols);
    check_dtype(path, b->name, b->dtype, rank);
    LoraPair p;
    p.a = owned(*ad, WeightMatrix{a->dtype, rank, slot.cols, a->data});
    p.b = owned(*ad, WeightMatrix{b->dtype, slot.rows, rank, b->data});
    p.scale = alpha != 0 ? static_cast<float>(alpha / double(rank)) : 1.0f;
    ad->layers[slot.layer][static_cast<size_t>(slot.target)] = p;
    ++n_pairs;
  }
  finish(*ad, path, n_pairs);
  return ad;
}

}  // namespace

void check_adapter_fits(const LoraAdapter& adapter, const ModelConfig& c) {
  if (adapter.layers.size() != c.n_layers)
    fail("{}: the adapter has {} layers, the model {}", adapter.source, adapter.layers.size(),
         c.n_layers);
  if (c.n_experts > 0)
    fail("{}: adapters on mixture-of-experts models are not supported", adapter.source);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    // Per-layer sizes: gemma4's global layers and double-wide FFNs differ from the rest.
    const size_t q = c.q_dim_of(l), kv = c.kv_dim_of(l), ff = c.d_ff_of(l);
    const size_t in[kLoraTargets] = {c.d_model, c.d_model, c.d_model, q, c.d_model, c.d_model, ff};
    const size_t out[kLoraTargets] = {q, kv, kv, c.d_model, ff, ff, c.d_model};
    for (size_t t = 0; t < kLoraTargets; ++t)
      if (const LoraPair* p = adapter.pair(l, static_cast<LoraTarget>(t)))
        if (p->a.cols != in[t] || p->b.rows != out[t] || p->b.cols != p->a.rows)
          fail("{}: layer {} {}: A [{}][{}] and B [{}][{}] do not fit [{}][{}]", adapter.source, l,
               lora_target_name(static_cast<LoraTarget>(t)), p->a.rows, p->a.cols, p->b.rows,
               p->b.cols, out[t], in[t]);
  }
}

std::vector<LoraTargetTensor> lora_target_tensors(const ModelConfig& base) {
  const Architecture* arch = find_architecture(base.architecture);
  std::vector<LoraTargetTensor> out;
  if (!arch || arch->fused_qkv || arch->fused_gate_up || base.n_experts > 0) return out;
  for (uint32_t l = 0; l < base.n_layers; ++l)
    for (const LayerTensor& t : layer_tensors(*arch, base, l)) {
      auto target = target_of(t.role);
      if (!target) continue;
      auto strip = [](std::string n) {
        return n.substr(0, n.size() - std::string_view(".weight").size());
      };
      out.push_back({l, *target, strip(t.gguf), strip(t.hf), t.rows, t.cols, t.rotary});
    }
  return out;
}

std::shared_ptr<const LoraAdapter> load_lora_adapter(const std::string& path,
                                                     const ModelWeights& base) {
  if (!fs::exists(path)) fail("{}: no such file or folder", path);
  if (base.config.n_experts > 0)
    fail("{}: adapters on mixture-of-experts models are not supported", path);
  const Architecture* arch = find_architecture(base.config.architecture);
  if (!arch) fail("{}: the base architecture '{}' is unknown", path, base.config.architecture);
  if (arch->fused_qkv || arch->fused_gate_up)
    fail("{}: adapters on {} models (fused projections) are not supported", path, arch->name);
  return fs::is_directory(path) ? load_peft(path, base) : load_gguf_lora(path, base);
}

}  // namespace pith
