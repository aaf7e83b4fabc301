// Test helper: a generated *ForCausalLM Hugging Face folder rewritten into the layout of a
// published multimodal checkpoint (the language model's config under text_config, its tensors
// under a prefix, beside a vision tower's), as pith must load the language model from it.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "engine_test_util.h"
#include "formats/safetensors.h"
#include "model_gen/model_gen.h"

namespace pith::test {

struct MultimodalLayout {
  std::string hf_class;                          // "Qwen3_5ForConditionalGeneration"
  std::string model_type;                        // top-level model_type, "qwen3_5"
  std::string text_model_type;                   // text_config's model_type, "qwen3_5_text"
  std::string prefix = "model.language_model.";  // replaces the leading "model."
  // Edits the text_config (e.g. drops keys the config class defaults).
  std::function<void(nlohmann::json&)> edit_text_config;
};

// A tiny *ForCausalLM folder of family `arch` (the bundled vocabulary) at `out`.
inline void generate_hf_folder(const std::string& arch, uint64_t seed,
                               const std::filesystem::path& out) {
  ThreadPool pool(2);
  ModelGenOptions g;
  g.arch = arch;
  g.format = "hf";
  g.vocab_path = model_path("tiny-f32");
  g.seed = seed;
  g.quiet = true;
  g.output = out.string();
  generate_model(g, pool);
}

inline void write_multimodal_folder(const std::filesystem::path& causal,
                                    const std::filesystem::path& mm, const MultimodalLayout& l) {
  namespace fs = std::filesystem;
  fs::create_directories(mm);
  nlohmann::json text;
  std::ifstream(causal / "config.json") >> text;
  nlohmann::json top = {{"architectures", {l.hf_class}},
                        {"model_type", l.model_type},
                        {"tie_word_embeddings", text["tie_word_embeddings"]},
                        {"vision_config", {{"depth", 1}, {"hidden_size", 8}}}};
  text.erase("architectures");
  text.erase("tie_word_embeddings");  // read from the top level, as published configs allow
  text["model_type"] = l.text_model_type;
  if (l.edit_text_config) l.edit_text_config(text);
  top["text_config"] = text;
  std::ofstream(mm / "config.json") << top.dump(2);
  auto renamed = [&](const std::string& n) {
    if (n.starts_with("model.")) return l.prefix + n.substr(6);
    if (n.starts_with("lm_head.") && l.prefix == "language_model.model.")
      return "language_model." + n;
    return n;
  };
  const char* extras[] = {"model.visual.patch_embed.proj.weight", "mtp.fc.weight"};
  std::string first_shard;
  for (const auto& entry : fs::directory_iterator(causal)) {
    if (entry.path().extension() != ".safetensors") continue;
    if (first_shard.empty()) first_shard = entry.path().filename().string();
    SafetensorsFile in(entry.path().string());
    SafetensorsWriter out((mm / entry.path().filename()).string());
    const bool with_extras = entry.path().filename() == first_shard;
    for (const auto& t : in.tensors())  // every tensor is declared before data is written
      out.add_tensor(renamed(t.name), *t.dtype, t.shape);
    if (with_extras)
      for (const char* name : extras) out.add_tensor(name, DType::F32, {2, 2});
    for (const auto& t : in.tensors()) out.write(t.data, t.n_bytes);
    const float extra[4] = {1, 2, 3, 4};
    if (with_extras)
      for (size_t i = 0; i < std::size(extras); ++i) out.write(extra, sizeof extra);
    out.finish();
  }
  if (fs::exists(causal / "model.safetensors.index.json")) {
    nlohmann::json index;
    std::ifstream(causal / "model.safetensors.index.json") >> index;
    nlohmann::json map = nlohmann::json::object();
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it)
      map[renamed(it.key())] = it.value();
    for (const char* name : extras) map[name] = first_shard;
    index["weight_map"] = map;
    std::ofstream(mm / "model.safetensors.index.json") << index.dump(2);
  }
}

}  // namespace pith::test
