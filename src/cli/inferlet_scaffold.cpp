// The `pith inferlet new` templates. See inferlet_scaffold.h.
#include "cli/inferlet_scaffold.h"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace pith::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSource =
    R"(// @NAME@: a pith inferlet, a program that drives the model step by step inside the server.
//
//   pith inferlet build @NAME@.cpp -o @NAME@.wasm
//   pith run -m MODEL.gguf @NAME@.wasm -- --prompt "Once upon a time" --max-tokens 32
//
// The SDK (header-only): pith/inferlet.hpp (PITH_INFERLET, Flags, Status and PITH_TRY),
// pith/pith.hpp (send/receive, HTTP, futures, key-value store), pith/context.hpp (Context: fill,
// generate, fork, export/import of KV pages), pith/sampling.hpp (samplers, stop conditions).
#include <pith/inferlet.hpp>

pith::Status @NAME_ID@(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "Hello", "the text to complete");
  uint32_t max_tokens = flags.u32("--max-tokens", 16, "tokens to generate at most");
  PITH_TRY(flags.done());  // --help, unknown arguments, numbers that do not parse

  pith::Model model = PITH_TRY(pith::Model::open(""));  // the server's model
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  pith::Generation out = ctx.generate(pith::Sampler::greedy(), pith::Stop{.max_tokens = max_tokens});
  pith::log("finish: " + out.finish_reason);
  return pith::send(out.text);  // a message to the client that launched this instance
}
PITH_INFERLET(@NAME_ID@)
)";

constexpr const char* kReadme = R"(# @NAME@

A pith inferlet: a C++ program compiled to WebAssembly (wasm32-wasi) that drives the model
token by token through the pith ABI. This one completes a prompt greedily.

## Build

    pith inferlet build @NAME@.cpp -o @NAME@.wasm

(clang++-14 for wasm32-wasi with the pith SDK: `-O2 -std=c++20 -fno-exceptions`, no SIMD.)

## Run

In-process, against a model file:

    pith run -m MODEL.gguf @NAME@.wasm -- --prompt "Once upon a time" --max-tokens 32

Against a server (`pith serve -m MODEL.gguf`): upload the module with
`POST /v1/programs` and launch it with `POST /v1/instances` (docs/server-api.md), or use the
Python client in clients/python.

## Arguments

| argument | default | meaning |
|---|---|---|
| `--prompt TEXT` | `Hello` | the text to complete |
| `--max-tokens N` | 16 | tokens to generate |

`--help` sends this list. The generated text comes back as one message; a log line says why
generation stopped. An error (e.g. an unknown argument) ends the instance with a non-zero exit
code and its message, sent as `error: MESSAGE` and logged.
)";

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// The template with the project name in place; @NAME_ID@ is the name as a C++ identifier.
std::string fill(const std::string& text, const std::string& name) {
  std::string id = name;
  for (char& c : id)
    if (c == '-') c = '_';
  if (id == "main") id = "main_inferlet";  // main() itself comes from PITH_INFERLET
  return replace_all(replace_all(text, "@NAME_ID@", id), "@NAME@", name);
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64 || !std::isalpha(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

}  // namespace

std::vector<std::string> scaffold_inferlet(const std::string& name, const std::string& dir) {
  if (!valid_name(name))
    fail("inferlet new: '{}' is not a valid name (a letter, then letters, digits, '_' or '-')",
         name);
  fs::path root = fs::path(dir.empty() ? "." : dir) / name;
  const std::pair<fs::path, const char*> files[] = {{root / (name + ".cpp"), kSource},
                                                    {root / "README.md", kReadme}};
  for (const auto& [path, text] : files)
    if (fs::exists(path)) fail("inferlet new: {} already exists", path.string());
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail("inferlet new: cannot create {}: {}", root.string(), ec.message());
  std::vector<std::string> written;
  for (const auto& [path, text] : files) {
    std::ofstream out(path, std::ios::binary);
    out << fill(text, name);
    if (!out.flush()) fail("inferlet new: cannot write {}", path.string());
    written.push_back(path.string());
  }
  return written;
}

}  // namespace pith::cli
