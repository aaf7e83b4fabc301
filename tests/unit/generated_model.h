// A tiny random-weight model of a family (pith model gen's "tiny" preset over the bundled
// vocabulary), written once per test process to a temporary GGUF file that is removed when the
// process exits, and loaded. `arch` may also name a variant of tests/data/oracle/arch/variants.json
// (a family's tiny preset with config options changed, e.g. gemma4-e2b).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model_loader.h"
#include "engine_test_util.h"
#include "model_gen/model_gen.h"

namespace pith::test {

inline std::shared_ptr<const ModelWeights> generated_model(const std::string& arch, uint64_t seed) {
  namespace fs = std::filesystem;
  const fs::path path =
      fs::temp_directory_path() /
      ("pith_gen_" + arch + "_" + std::to_string(seed) + "_" + std::to_string(getpid()) + ".gguf");
  static struct Cleanup {
    std::vector<fs::path> files;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& f : files) fs::remove(f, ec);
    }
  } cleanup;
  if (!fs::exists(path)) {
    cleanup.files.push_back(path);
    ThreadPool pool(2);
    ModelGenOptions g;
    g.preset = "tiny";
    g.arch = arch;
    std::ifstream in(std::string(PITH_TEST_DATA) + "/oracle/arch/variants.json");
    const nlohmann::json variants = nlohmann::json::parse(in);
    if (variants.contains(arch)) {
      g.arch = variants[arch]["arch"].get<std::string>();
      g.options = variants[arch]["options"].get<std::vector<std::string>>();
    }
    g.vocab_path = model_path("tiny-f32");
    g.seed = seed;
    g.quiet = true;
    g.output = path.string();
    generate_model(g, pool);
  }
  LoadOptions lo;
  lo.quiet = true;
  return load_model(path.string(), lo);
}

}  // namespace pith::test
