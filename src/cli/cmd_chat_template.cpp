// pith chat-template: renders a model's Jinja chat template for one request, as Hugging Face's
// apply_chat_template would.
//   pith chat-template --template FILE --case CASE.json
// FILE is a .jinja file, a GGUF model (its `tokenizer.chat_template`) or a tokenizer_config.json
// (its `chat_template`). CASE.json is an object with `messages`, `add_generation_prompt`,
// `bos_token`, `eos_token`, optional `tools`, `documents` and `extra_context` (extra template
// variables); null or absent special tokens are not passed. The rendering is printed exactly,
// with no added newline. A template's raise_exception(msg) exits 1 with msg on stderr.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/read_file.h"
#include "formats/gguf.h"

namespace pith::cli {

namespace {

struct ChatTemplateArgs {
  std::string template_path;
  std::string case_path;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The template source from a .jinja file, a GGUF model or a tokenizer_config.json.
std::string load_template_source(const std::string& path) {
  if (ends_with(path, ".gguf")) {
    GGUFFile f(path);
    auto source = f.get_string_opt("tokenizer.chat_template");
    if (!source) fail("{}: the model has no tokenizer.chat_template", path);
    return *source;
  }
  if (ends_with(path, ".json")) {
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::parse_error& e) {
      fail("{}: invalid JSON: {}", path, e.what());
    }
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) fail("{}: no 'chat_template' key", path);
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array()) {  // [{"name": "default", "template": "..."}, ...]
      for (const auto& entry : *it)
        if (entry.is_object() && entry.value("name", "") == "default" &&
            entry.contains("template") && entry["template"].is_string())
          return entry["template"].get<std::string>();
    }
    fail("{}: 'chat_template' is neither a string nor a list with a 'default' entry", path);
  }
  return read_file(path);
}

void run_chat_template(const ChatTemplateArgs& a) {
  ChatTemplate tmpl(load_template_source(a.template_path));
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(read_file(a.case_path));
  } catch (const nlohmann::json::parse_error& e) {
    fail("{}: invalid JSON: {}", a.case_path, e.what());
  }
  std::string out = tmpl.render(ChatTemplate::variables_for(request));
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_chat_template_commands(CLI::App& app) {
  auto args = std::make_shared<ChatTemplateArgs>();
  auto* cmd =
      app.add_subcommand("chat-template", "Render a model's Jinja chat template for one request");
  cmd->add_option("--template", args->template_path,
                  "Template: .jinja file, GGUF model or tokenizer_config.json")
      ->required();
  cmd->add_option("--case", args->case_path,
                  "Request JSON: messages, add_generation_prompt, bos_token, eos_token, tools, "
                  "documents, extra_context")
      ->required();
  cmd->callback([args] { run_chat_template(*args); });
}

}  // namespace pith::cli
