// pith model info: what a model file holds.
#include <fmt/format.h>

#include <string>

#include "cli/commands.h"
#include "engine/gguf.h"

namespace pith::cli {

namespace {

void model_info(const std::string& path) {
  GGUFFile f(path);
  std::string arch = f.get_string_opt("general.architecture").value_or("?");
  fmt::print("file: {} (GGUF v{}, {} bytes)\n", path, f.version(), f.file_size());
  fmt::print("architecture: {}\n", arch);
  if (auto name = f.get_string_opt("general.name")) fmt::print("name: {}\n", *name);
  fmt::print("tensors: {}\n", f.tensors().size());
  uint64_t params = 0;
  for (const auto& t : f.tensors()) params += t.n_elements;
  fmt::print("parameters: {}\n", params);
  if (f.has("tokenizer.ggml.model"))
    fmt::print("tokenizer: {} ({} tokens)\n", f.get_string("tokenizer.ggml.model"),
               f.get_string_array("tokenizer.ggml.tokens").size());
  fmt::print("chat template: {}\n", f.has("tokenizer.chat_template") ? "yes" : "no");
}

}  // namespace

void add_model_commands(CLI::App& app) {
  auto* model = app.add_subcommand("model", "Inspect and generate model files");
  model->require_subcommand(1);

  auto* info = model->add_subcommand("info", "Print a model's architecture, shapes and tokenizer");
  static std::string info_path;
  info->add_option("model", info_path, "GGUF file or Hugging Face folder")->required();
  info->callback([] { model_info(info_path); });
}

}  // namespace pith::cli
