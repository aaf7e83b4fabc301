// The `pith inferlet new` templates. See inferlet_scaffold.h.
#include "cli/inferlet_scaffold.h"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace pith::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSource = R"(// @NAME@: a pith inferlet, a program that drives the model step by step inside the server.
//
//   pith inferlet build @NAME@.cpp -o @NAME@.wasm
//   pith run -m MODEL.gguf @NAME@.wasm -- --prompt "Once upon a time" --max-tokens 32
//
// The SDK (header-only): pith/pith.hpp (args, send/receive, HTTP, futures, key-value store),
// pith/context.hpp (Context: fill, generate, fork, export/import of KV pages),
// pith/sampling.hpp (samplers and stop conditions), pith/beam_search.hpp.
#include <pith/context.hpp>
#include <stdlib.h>

int main() {
  std::string prompt = "Hello";
  uint32_t max_tokens = 16;
  std::vector<std::string> args = pith::args();  // args[0] is the program name
  for (size_t i = 1; i + 1 < args.size(); i += 2) {
    if (args[i] == "--prompt") prompt = args[i + 1];
    else if (args[i] == "--max-tokens") max_tokens = static_cast<uint32_t>(atoi(args[i + 1].c_str()));
    else return pith::send("unknown argument " + args[i]), 2;
  }

  auto model = pith::Model::open("");  // the server's model
  if (!model) return pith::send(std::string("no model: ") + pith::status_name(model.status())), 1;
  auto ctx = pith::Context::create(*model);
  if (!ctx) return pith::send(std::string("no context: ") + pith::status_name(ctx.status())), 1;
  if (ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  ctx->fill(prompt);
  pith::Generation out = ctx->generate(pith::Sampler::greedy(), pith::Stop{.max_tokens = max_tokens});
  pith::send(out.text);  // a message to the client that launched this instance
  pith::log("finish: " + out.finish_reason);
  return 0;
}
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

The generated text comes back as one message; a log line says why generation stopped.
)";

std::string fill(std::string text, const std::string& name) {
  const std::string key = "@NAME@";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + name.size()))
    text.replace(at, key.size(), name);
  return text;
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
    fail("inferlet new: '{}' is not a valid name (a letter, then letters, digits, '_' or '-')", name);
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
