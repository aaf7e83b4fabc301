// The models and helpers of cuda_backend_test: test-data paths (PITH_TEST_DATA in the
// environment wins, as the GPU check runs a build made on another machine), generated tiny
// models per family and dtype, random prompts and page arithmetic.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "engine/model_loader.h"
#include "model_gen/model_gen.h"

namespace pith {

// PITH_TEST_DATA in the environment wins: the GPU check runs a build made on another machine.
inline std::string data_path(const std::string& rel) {
  const char* env = std::getenv("PITH_TEST_DATA");
  return std::string(env && *env ? env : PITH_TEST_DATA) + "/" + rel;
}

inline std::shared_ptr<const ModelWeights> load(const std::string& path) {
  LoadOptions opt;
  opt.quiet = true;
  return load_model(path, opt);
}

// A generated tiny model (BF16 unless told), once per test process, family (or a variant of
// tests/data/oracle/arch/variants.json, e.g. qwen3-yarn) and dtype: "" is llama with the 128k Llama
// 3 vocabulary; another family (model_gen's generic tiny shape of it, with small sliding windows
// and soft-caps so short prompts reach them) takes tiny-f32's 1000-token vocabulary. `preset`
// picks another of model_gen's tiny shapes (tiny256: head_dim 64, a size FlashInfer runs).
inline std::string generated_model(const std::string& arch, DType dtype = DType::BF16,
                                   const std::string& preset = "tiny") {
  static std::map<std::string, std::string> paths;
  const std::string key = (arch.empty() ? "llama" : arch) + (dtype == DType::F32 ? "-f32" : "") +
                          (preset == "tiny" ? "" : "-" + preset);
  auto it = paths.find(key);
  if (it != paths.end()) return it->second;
  std::string p = (std::filesystem::temp_directory_path() /
                   ("pith-gpu-test-" + std::to_string(getpid()) + "-" + key + ".gguf"))
                      .string();
  ModelGenOptions o;
  o.preset = preset;
  o.arch = arch;
  // A variant of the oracle models (a family's preset with config options changed).
  std::ifstream in(data_path("oracle/arch/variants.json"));
  const nlohmann::json variants = nlohmann::json::parse(in);
  if (variants.contains(arch)) {
    o.arch = variants[arch]["arch"].get<std::string>();
    o.options = variants[arch]["options"].get<std::vector<std::string>>();
  }
  o.dtype = dtype;  // the same seed: an F32 model holds the BF16 one's weights before rounding
  o.vocab_path = arch.empty() ? data_path("tokenizer/ggml-vocab-llama-bpe.gguf")
                              : data_path("models/tiny-f32.gguf");
  o.output = p;
  o.seed = 7;
  o.quiet = true;
  ThreadPool pool(2);
  generate_model(o, pool);
  if (paths.empty())
    std::atexit([] {
      for (const auto& [a, path] : paths) std::filesystem::remove(path);
    });
  paths[key] = p;
  return p;
}

inline std::vector<int32_t> random_tokens(size_t n, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, std::min(vocab, 30000) - 1);
  std::vector<int32_t> t{1};
  while (t.size() < n) t.push_back(d(rng));
  return t;
}

inline uint32_t pages_for(uint32_t n, uint32_t ps) {
  return (n + ps - 1) / ps;
}
inline uint32_t last_len(uint32_t n, uint32_t ps) {
  return n - (pages_for(n, ps) - 1) * ps;
}

}  // namespace pith
