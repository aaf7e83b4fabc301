#include "model_gen/lora_gen.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/architectures/architecture.h"
#include "engine/hf_loader.h"
#include "engine/model_loader.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model_gen/normal_rng.h"

namespace pith {

namespace fs = std::filesystem;

std::vector<LoraTarget> parse_lora_targets(const std::string& list) {
  std::vector<LoraTarget> out;
  if (list.empty() || list == "all") return out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (name.ends_with("_proj")) name.resize(name.size() - 5);
    bool found = false;
    for (size_t t = 0; t < kLoraTargets; ++t) {
      std::string known = lora_target_name(static_cast<LoraTarget>(t));
      if (known.substr(0, known.size() - 5) == name) {
        out.push_back(static_cast<LoraTarget>(t));
        found = true;
      }
    }
    if (!found) fail("unknown LoRA target '{}' (q, k, v, o, gate, up, down, or all)", name);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

namespace {

void encode(DType dt, const std::vector<float>& x, std::vector<uint8_t>& out) {
  out.resize(x.size() * dtype_info(dt).block_bytes);
  for (size_t i = 0; i < x.size(); ++i) {
    if (dt == DType::F32) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      uint16_t h = dt == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
}

// One matrix's values in pith's row order, each row from its own stream.
std::vector<float> draw(const LoraGenOptions& o, const LoraTargetTensor& t, bool is_b, size_t rows,
                        size_t cols) {
  static const NormalZiggurat normal;
  std::vector<float> v(rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    uint64_t key = o.seed;
    for (uint64_t part : {uint64_t{t.layer}, uint64_t(t.target), uint64_t{is_b}, uint64_t{r}})
      key = splitmix64(key ^ (part + 0x51ed27ull));
    Xoshiro256 rng(key);
    for (size_t c = 0; c < cols; ++c) v[r * cols + c] = o.std * static_cast<float>(normal(rng));
  }
  return v;
}

}  // namespace

LoraGenResult generate_lora(const LoraGenOptions& o) {
  if (o.format != "peft" && o.format != "gguf")
    fail("gen-lora: format '{}' (peft or gguf)", o.format);
  if (o.dtype != DType::F32 && o.dtype != DType::F16 && o.dtype != DType::BF16)
    fail("gen-lora: dtype {} (f32, f16 or bf16)", dtype_info(o.dtype).name);
  if (o.rank == 0 || o.rank > 4096) fail("gen-lora: rank {} (1..4096)", o.rank);
  if (o.output.empty()) fail("gen-lora: no output path");
  auto base = load_model(o.base_path, LoadOptions{.quiet = true});
  const ModelConfig& c = base->config;
  std::vector<LoraTargetTensor> all = lora_target_tensors(c);
  if (all.empty())
    fail("gen-lora: {} models are not adapted by pith (fused projections or experts)",
         c.architecture);
  std::vector<LoraTarget> want = o.targets;
  if (want.empty())
    for (size_t t = 0; t < kLoraTargets; ++t) want.push_back(static_cast<LoraTarget>(t));
  std::vector<LoraTargetTensor> chosen;
  for (const auto& t : all)
    if (std::find(want.begin(), want.end(), t.target) != want.end()) chosen.push_back(t);

  LoraGenResult res;
  std::vector<uint8_t> bytes;
  if (o.format == "gguf") {
    const Architecture* arch = find_architecture(c.architecture);
    GGUFWriter w(o.output);
    w.set_string("general.architecture", std::string(arch->gguf_name));
    w.set_string("general.type", "adapter");
    w.set_string("general.name", fmt::format("pith-random-lora-r{}", o.rank));
    w.set_string("adapter.type", "lora");
    w.set_f32("adapter.lora.alpha", o.alpha);
    for (const auto& t : chosen) {
      w.add_tensor(t.gguf + ".weight.lora_a", {t.cols, o.rank}, o.dtype);
      w.add_tensor(t.gguf + ".weight.lora_b", {o.rank, t.rows}, o.dtype);
    }
    for (const auto& t : chosen) {
      encode(o.dtype, draw(o, t, false, o.rank, t.cols), bytes);
      w.write(bytes.data(), bytes.size());
      encode(o.dtype, draw(o, t, true, t.rows, o.rank), bytes);
      w.write(bytes.data(), bytes.size());
      res.n_params += o.rank * (t.rows + t.cols);
    }
    w.finish();
    res.files.push_back(o.output);
  } else {
    fs::create_directories(o.output);
    const std::string weights = (fs::path(o.output) / "adapter_model.safetensors").string();
    SafetensorsWriter w(weights, {{"format", "pt"}});
    auto peft_name = [](const LoraTargetTensor& t, const char* half) {
      return "base_model.model." + t.hf + ".lora_" + half + ".weight";
    };
    for (const auto& t : chosen) {
      w.add_tensor(peft_name(t, "A"), o.dtype, {o.rank, t.cols});
      w.add_tensor(peft_name(t, "B"), o.dtype, {t.rows, o.rank});
    }
    for (const auto& t : chosen) {
      encode(o.dtype, draw(o, t, false, o.rank, t.cols), bytes);
      w.write(bytes.data(), bytes.size());
      std::vector<float> b = draw(o, t, true, t.rows, o.rank);
      if (t.rotary) {  // HF row h holds pith row pith_row_for_hf_row(h)
        std::vector<float> hf(b.size());
        for (size_t h = 0; h < t.rows; ++h)
          std::copy_n(b.data() + pith_row_for_hf_row(h, c.head_dim) * o.rank, o.rank,
                      hf.data() + h * o.rank);
        b.swap(hf);
      }
      encode(o.dtype, b, bytes);
      w.write(bytes.data(), bytes.size());
      res.n_params += o.rank * (t.rows + t.cols);
    }
    w.finish();
    std::vector<std::string> modules;
    for (LoraTarget t : want) modules.push_back(lora_target_name(t));
    nlohmann::json cfg = {{"peft_type", "LORA"},
                          {"task_type", "CAUSAL_LM"},
                          {"base_model_name_or_path", fs::absolute(o.base_path).string()},
                          {"r", o.rank},
                          {"lora_alpha", o.alpha},
                          {"lora_dropout", 0.0},
                          {"target_modules", modules},
                          {"bias", "none"},
                          {"fan_in_fan_out", false},
                          {"use_rslora", false},
                          {"use_dora", false},
                          {"inference_mode", true}};
    const std::string config = (fs::path(o.output) / "adapter_config.json").string();
    std::ofstream(config) << cfg.dump(2) << "\n";
    res.files = {config, weights};
  }
  for (const auto& f : res.files) res.bytes += fs::file_size(f);
  return res;
}

}  // namespace pith
