// pith logits: the logits of a prompt at every position, from ONE prefill through the engine's
// batched forward handler (the same path the server uses). The checking tool against reference
// implementations: `--json` prints
//   {"tokens":[...], "positions":[{"pos":0, "logsumexp":..., "top":[{"id":..., "logit":...}]}]}
// where positions[i] holds the logits after input i (predicting token i+1), logsumexp is over
// the whole vocabulary and `top` is sorted by logit (ties by lower id).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/commands.h"
#include "common/error.h"
#include "engine/kv_pool.h"
#include "engine/lora_adapter.h"
#include "engine/model_loader.h"
#include "engine/token_distribution.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pith::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string prompt;
  std::string tokens;
  uint32_t top = 10;
  bool no_bos = false;
  bool json = false;
  size_t threads = 0;
  uint32_t page_size = 16;
  std::string device = "auto";
  std::string kv_dtype = "auto";
  std::string cuda_attention = "auto";
  std::string lora;  // adapter path, applied to the whole prompt
};

std::vector<int32_t> parse_token_list(const std::string& s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      fail("--tokens: '{}' is not a token id (expected e.g. 1,15043,3186)", item);
    out.push_back(v);
    i = j + 1;
  }
  if (out.empty()) fail("--tokens: no token ids given");
  return out;
}

// The model's BOS id without building a tokenizer: GGUF metadata, or an HF folder's
// config.json / tokenizer_config.json. -1 when the model declares none.
int64_t model_bos_id(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) {
    GGUFFile f(path);
    return f.has("tokenizer.ggml.bos_token_id")
               ? static_cast<int64_t>(f.get_uint("tokenizer.ggml.bos_token_id"))
               : -1;
  }
  fs::path cfg = fs::path(path) / "config.json";
  std::ifstream in(cfg);
  if (!in) return -1;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    return j["bos_token_id"].get<int64_t>();
  return -1;
}

void run_logits(const LogitsArgs& a) {
  if (a.prompt.empty() == a.tokens.empty())
    fail("pith logits: give exactly one of --prompt or --tokens");
  if (a.top == 0) fail("pith logits: --top must be at least 1");
  // Load progress goes to stderr with every log line, so --json's stdout stays one object (the
  // e2e logits tests parse it: a log line on stdout fails them).
  auto weights = load_model(a.model, LoadOptions{});
  const ModelConfig& c = weights->config;

  std::vector<int32_t> tokens;
  if (!a.prompt.empty()) {
    Tokenizer tok = Tokenizer::load(a.model);
    tokens = tok.encode(a.prompt, !a.no_bos, true);
    if (tokens.empty()) fail("pith logits: the prompt encodes to no tokens");
  } else {
    tokens = parse_token_list(a.tokens);
    if (!a.no_bos) {
      int64_t bos = model_bos_id(a.model);
      if (bos < 0) fail("pith logits: {} declares no BOS token; pass --no-bos", a.model);
      tokens.insert(tokens.begin(), static_cast<int32_t>(bos));
    }
  }
  for (int32_t t : tokens)
    if (t < 0 || uint32_t(t) >= c.vocab_size)
      fail("pith logits: token id {} out of range (vocab {})", t, c.vocab_size);
  const uint32_t n = static_cast<uint32_t>(tokens.size());

  // A KV pool just big enough for the prompt (in f32 pages, the largest any backend stores).
  BackendOptions eo;
  eo.kv_page_size = a.page_size;
  eo.kv_dtype = parse_kv_dtype(a.kv_dtype);
  // Logits are a reference: on the CPU the cache keeps exactly what the forward computed unless
  // --kv-dtype says otherwise (a GPU stores its activation type either way).
  if (eo.kv_dtype == KvDType::Auto && !device_is_cuda(a.device)) eo.kv_dtype = KvDType::F32;
  eo.n_threads = a.threads;
  eo.max_embeds = 1;
  const uint32_t n_pages = (n + a.page_size - 1) / a.page_size;
  eo.kv_memory_bytes = kv_shape_for(c, a.page_size, KvDType::F32).page_bytes() * n_pages;
  eo.state_memory_bytes = c.recurrent_state_floats() * sizeof(float);  // one sequence's
  eo.device = a.device;
  eo.cuda_attention = parse_cuda_attention(a.cuda_attention);
  auto backend = make_backend(weights, eo);
  Backend& engine = *backend;

  SequenceInput s;
  if (!a.lora.empty()) {
    engine.load_adapter(1, load_lora_adapter(a.lora, *weights));
    s.adapter = 1;
  }
  s.tokens = tokens;
  s.kv_pages = engine.page_slots().allocate(n_pages);
  if (c.hybrid()) {  // the recurrent layers' state, empty before the prompt
    s.state_slot = engine.state_slots().allocate(1)[0];
    engine.clear_states(std::span<const uint32_t>(&s.state_slot, 1));
  }
  s.last_page_len = n - (n_pages - 1) * a.page_size;
  for (uint32_t i = 0; i < n; ++i) {
    s.positions.push_back(i);
    s.outputs.push_back({i, OutputKind::Logits, 0, 0});
  }
  auto result = engine.forward({s});

  nlohmann::ordered_json out;
  out["tokens"] = tokens;
  out["positions"] = nlohmann::ordered_json::array();
  for (uint32_t i = 0; i < n; ++i) {
    const std::vector<float>& lg = result[0].outputs[i].logits;
    TokenDistribution top = top_k_distribution(lg.data(), lg.size(), a.top);
    double lse = logsumexp(lg.data(), lg.size());
    if (a.json) {
      nlohmann::ordered_json p;
      p["pos"] = i;
      p["logsumexp"] = lse;
      p["top"] = nlohmann::ordered_json::array();
      for (int32_t id : top.ids) p["top"].push_back({{"id", id}, {"logit", lg[id]}});
      out["positions"].push_back(std::move(p));
    } else {
      std::string line = fmt::format("pos {:4} token {:6} logsumexp {:9.5f} |", i, tokens[i], lse);
      for (int32_t id : top.ids) line += fmt::format(" {}:{:.5f}", id, lg[id]);
      fmt::print("{}\n", line);
    }
  }
  if (a.json) fmt::print("{}\n", out.dump());
}

}  // namespace

void add_logits_commands(CLI::App& app) {
  static LogitsArgs args;
  auto* cmd = app.add_subcommand(
      "logits", "Logits of a prompt at every position (one batched prefill), for checking");
  cmd->add_option("-m,--model", args.model, "GGUF file or Hugging Face folder")->required();
  cmd->add_option("--prompt", args.prompt, "Text, tokenized with the model's tokenizer");
  cmd->add_option("--lora", args.lora, "LoRA adapter (PEFT folder or GGUF) applied to the prompt");
  cmd->add_option("--tokens", args.tokens, "Comma-separated token ids, e.g. 1,15043,3186");
  cmd->add_option("--top", args.top, "Top logits to print per position")->default_val(10);
  cmd->add_flag("--no-bos", args.no_bos, "Do not prepend the model's BOS token");
  cmd->add_flag("--json", args.json, "Print one JSON object instead of a table");
  cmd->add_option("-t,--threads", args.threads, "Threads (0: one per core)")->default_val(0);
  cmd->add_option("--kv-page-size", args.page_size, "Tokens per KV page")
      ->default_val(16)
      ->check(CLI::Range(1, 4096));
  add_device_option(*cmd, args.device);
  add_cuda_attention_option(*cmd, args.cuda_attention);
  add_kv_dtype_option(*cmd, args.kv_dtype);
  cmd->callback([] { run_logits(args); });
}

}  // namespace pith::cli
