// pith model info | gen: what a model file or folder holds, and random-weight models with real
// Llama 3 shapes for tests and benchmarks.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "engine/model_loader.h"
#include "formats/gguf.h"
#include "model_gen/lora_gen.h"
#include "model_gen/model_gen.h"

namespace pith::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// Tokenizer kind and chat-template presence, from GGUF metadata or HF tokenizer files.
void describe_tokenizer(const std::string& path, ordered_json& j) {
  if (!fs::is_directory(path)) {
    GGUFFile f(path);
    if (f.has("tokenizer.ggml.model")) {
      j["tokenizer"] = {{"kind", f.get_string("tokenizer.ggml.model")},
                        {"pre", f.get_string_opt("tokenizer.ggml.pre").value_or("")},
                        {"tokens", f.has("tokenizer.ggml.tokens")
                                       ? f.get_string_array("tokenizer.ggml.tokens").size()
                                       : 0}};
    } else {
      j["tokenizer"] = nullptr;
    }
    j["chat_template"] = f.has("tokenizer.chat_template");
    j["gguf_version"] = f.version();
    return;
  }
  // Plain (std::map) json: ordered_json's linear key lookup is quadratic on a 128k vocab.
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  };
  nlohmann::json tok = read(fs::path(path) / "tokenizer.json");
  if (tok.is_object() && tok.contains("model") && tok["model"].is_object()) {
    const auto& m = tok["model"];
    j["tokenizer"] = {{"kind", m.value("type", std::string("?"))},
                      {"byte_fallback", m.value("byte_fallback", false)},
                      {"tokens", m.contains("vocab") ? m["vocab"].size() : 0}};
  } else {
    j["tokenizer"] = nullptr;
  }
  nlohmann::json cfg = read(fs::path(path) / "tokenizer_config.json");
  j["chat_template"] =
      (cfg.is_object() && cfg.contains("chat_template") && !cfg["chat_template"].is_null()) ||
      fs::exists(fs::path(path) / "chat_template.jinja");
}

void model_info(const std::string& path, bool as_json) {
  auto w = load_model(path, LoadOptions{.quiet = true});
  const ModelConfig& c = w->config;
  ordered_json j;
  j["path"] = path;
  j["format"] = w->format;
  j["architecture"] = c.architecture;
  j["name"] = c.name;
  j["n_layers"] = c.n_layers;
  j["d_model"] = c.d_model;
  j["n_heads"] = c.n_heads;
  j["n_kv_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["d_ff"] = c.d_ff;
  j["vocab_size"] = c.vocab_size;
  j["context_length"] = c.context_length;
  j["rms_eps"] = c.rms_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_freq_factors"] = c.rope_freq_factors;
  if (c.yarn.factor > 0)
    j["rope_yarn"] = {{"factor", c.yarn.factor},
                      {"original_context", c.yarn.original_context},
                      {"beta_fast", c.yarn.beta_fast},
                      {"beta_slow", c.yarn.beta_slow},
                      {"mscale", c.yarn.mscale}};
  j["tied_output"] = c.tied_output;
  if (!c.pooling.empty()) j["pooling"] = c.pooling;  // an embedding model's
  j["dtype"] = dtype_summary(*w);
  j["n_params"] = w->n_params();
  j["weight_bytes"] = w->weight_bytes();
  j["active_weight_bytes"] = w->active_weight_bytes();
  j["family_options"] = family_option_summary(c);
  j["sliding_window"] = c.sliding_window;
  if (c.sliding_window > 0) j["sliding_layers"] = c.sliding_layers;
  if (c.n_experts > 0)
    j["experts"] = {{"count", c.n_experts},
                    {"used", c.n_experts_used},
                    {"d_ff", c.d_ff_expert},
                    {"shared_d_ff", c.d_ff_shared_expert},
                    {"renormalised", c.moe_norm_top_k}};
  describe_tokenizer(path, j);
  if (as_json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("model: {} ({})\n", path,
             w->format == "gguf" ? fmt::format("GGUF v{}", j["gguf_version"].get<int>())
                                 : "Hugging Face folder");
  fmt::print("architecture: {}{}\n", c.architecture, c.name.empty() ? "" : "  name: " + c.name);
  fmt::print("layers: {}  d_model: {}  heads: {}  kv heads: {}  head_dim: {}  d_ff: {}\n",
             c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff);
  fmt::print("vocab: {}  context: {}  rms_eps: {:g}  output: {}\n", c.vocab_size, c.context_length,
             c.rms_eps, c.tied_output ? "tied (token_embd)" : "untied");
  std::string scaling = "none";
  if (!c.rope_freq_factors.empty())
    scaling = fmt::format("per-pair factors {:g}..{:g}", c.rope_freq_factors.front(),
                          c.rope_freq_factors.back());
  if (c.yarn.factor > 0)
    scaling =
        fmt::format("{}yarn x{:g} from {} tokens (betas {:g}/{:g}, mscale {:g})",
                    scaling == "none" ? "" : scaling + " and ", c.yarn.factor,
                    c.yarn.original_context, c.yarn.beta_fast, c.yarn.beta_slow, c.yarn.mscale);
  if (c.longrope.enabled())
    scaling = fmt::format("LongRoPE, {} factors ({}) for a {}-token context over the original {}",
                          c.context_length > c.longrope.original_context ? "long" : "short",
                          scaling, c.context_length, c.longrope.original_context);
  if (c.rope_attn_factor != 1.0f) scaling += fmt::format(", cos/sin x{:g}", c.rope_attn_factor);
  fmt::print("rope: theta {:g}, scaling {}\n", c.rope_theta, scaling);
  fmt::print("weights: {}, {} parameters, {:.1f} MiB in matrices\n", dtype_summary(*w),
             w->n_params(), double(w->weight_bytes()) / (1 << 20));
  fmt::print("family options: {}\n", family_option_summary(c));
  if (!c.pooling.empty()) fmt::print("embedding pooling: {}\n", c.pooling);
  if (c.sliding_window > 0) {
    uint32_t n = 0;
    for (uint32_t l = 0; l < c.n_layers; ++l) n += c.layer_slides(l);
    fmt::print("sliding window: {} slots on {} of {} layers\n", c.sliding_window, n, c.n_layers);
  }
  if (c.n_experts > 0)
    fmt::print("experts: {} of {} per token (width {}{}), {:.1f} MiB read per token\n",
               c.n_experts_used, c.n_experts, c.d_ff_expert,
               c.d_ff_shared_expert ? fmt::format(", shared expert {}", c.d_ff_shared_expert) : "",
               double(w->active_weight_bytes()) / (1 << 20));
  if (j["tokenizer"].is_null()) {
    fmt::print("tokenizer: none\n");
  } else {
    fmt::print("tokenizer: {} ({} tokens)\n", j["tokenizer"]["kind"].get<std::string>(),
               j["tokenizer"]["tokens"].get<size_t>());
  }
  fmt::print("chat template: {}\n", j["chat_template"].get<bool>() ? "yes" : "no");
}

// "2G", "500M", "64K" or plain bytes.
uint64_t parse_size(const std::string& s) {
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    fail("invalid size '{}' (e.g. 2G, 500M, 1048576)", s);
  }
  std::string unit = s.substr(pos);
  uint64_t mul = 1;
  if (unit == "K" || unit == "k")
    mul = 1ull << 10;
  else if (unit == "M" || unit == "m")
    mul = 1ull << 20;
  else if (unit == "G" || unit == "g")
    mul = 1ull << 30;
  else if (!unit.empty())
    fail("invalid size '{}' (e.g. 2G, 500M, 1048576)", s);
  return v * mul;
}

struct GenArgs {
  ModelGenOptions opt;
  std::string dtype = "f32";
  std::string shard_size = "2G";
  size_t threads = 0;
};

void model_gen(GenArgs& a) {
  if (auto mix = quant_mix_from_name(a.dtype)) {
    a.opt.mix = *mix;
  } else {
    auto dt = dtype_from_name(a.dtype);
    if (!dt)
      fail(
          "unknown dtype '{}' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k, or "
          "the llama.cpp mixes q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_m, q4_k_s, q5_k_m, q6_k, "
          "iq4_nl, iq4_xs, mxfp4_moe)",
          a.dtype);
    a.opt.dtype = *dt;
  }
  a.opt.shard_bytes = parse_size(a.shard_size);
  ThreadPool pool(a.threads);
  ModelGenResult r = generate_model(a.opt, pool);
  fmt::print(
      "wrote {} ({} {}, {} format): {} parameters, {:.1f} MiB in {} file(s), {:.2f} s ({:.0f} "
      "MiB/s)\n",
      a.opt.output, a.opt.preset, a.dtype, a.opt.format, r.n_params, double(r.bytes) / (1 << 20),
      r.files.size(), r.seconds, double(r.bytes) / (1 << 20) / std::max(r.seconds, 1e-9));
}

struct GenLoraArgs {
  LoraGenOptions opt;
  std::string dtype = "f32";
  std::string targets = "all";
};

void model_gen_lora(GenLoraArgs& a) {
  auto dt = dtype_from_name(a.dtype);
  if (!dt) fail("unknown dtype '{}' (f32, f16 or bf16)", a.dtype);
  a.opt.dtype = *dt;
  a.opt.targets = parse_lora_targets(a.targets);
  LoraGenResult r = generate_lora(a.opt);
  fmt::print("wrote {} (LoRA rank {}, alpha {}, {} {}, targets {}): {} parameters, {:.1f} MiB\n",
             a.opt.output, a.opt.rank, a.opt.alpha, a.opt.format, a.dtype, a.targets, r.n_params,
             double(r.bytes) / (1 << 20));
}

}  // namespace

void add_model_commands(CLI::App& app) {
  auto* model = app.add_subcommand("model", "Inspect and generate model files");
  model->require_subcommand(1);

  auto* info =
      model->add_subcommand("info", "Print a model's architecture, shapes, dtypes and tokenizer");
  static std::string info_path;
  static bool info_json = false;
  info->add_option("model", info_path, "GGUF file or Hugging Face folder")->required();
  info->add_flag("--json", info_json, "Print as JSON");
  info->callback([] { model_info(info_path, info_json); });

  auto* gen = model->add_subcommand(
      "gen", "Write a random-weight model of any supported family (real shapes, real vocabulary)");
  static GenArgs g;
  g.opt.vocab_path = "tests/data/tokenizer/ggml-vocab-llama-bpe.gguf";
  gen->add_option("--preset", g.opt.preset,
                  fmt::format("Shape: {}", fmt::join(model_preset_names(), ", ")))
      ->capture_default_str();
  gen->add_option("--arch", g.opt.arch,
                  fmt::format("Family: {} (default: the preset's own, llama for tiny shapes)",
                              supported_architecture_names()));
  gen->add_option("--option", g.opt.options,
                  "KEY=VALUE config.json option over the preset's (repeatable), e.g. "
                  "num_kv_shared_layers=2");
  gen->add_option("--dtype", g.dtype,
                  "Matrix dtype: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, or "
                  "llama.cpp's "
                  "per-tensor K-quant mixes q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_m, q4_k_s, q5_k_m, "
                  "q6_k, IQ4 mixes iq4_nl, iq4_xs and gpt-oss's mxfp4_moe (quantised: GGUF only)")
      ->capture_default_str();
  gen->add_option("--vocab", g.opt.vocab_path, "GGUF file whose tokenizer.* metadata is copied")
      ->capture_default_str();
  gen->add_option("--format", g.opt.format, "gguf (a file) or hf (a folder)")
      ->capture_default_str();
  gen->add_option("--seed", g.opt.seed, "Random seed")->capture_default_str();
  gen->add_option("-o,--output", g.opt.output, "Output GGUF file or HF folder")->required();
  gen->add_option("--shard-size", g.shard_size, "HF: start a new safetensors shard above this size")
      ->capture_default_str();
  gen->add_option("--threads", g.threads, "Worker threads (0: one per core)")
      ->capture_default_str();
  gen->add_flag("-q,--quiet", g.opt.quiet, "No progress on stderr");
  gen->callback([] { model_gen(g); });

  auto* lora = model->add_subcommand(
      "gen-lora", "Write a random LoRA adapter for a base model (PEFT folder or GGUF adapter)");
  static GenLoraArgs gl;
  lora->add_option("-m,--model", gl.opt.base_path, "Base model: GGUF file or Hugging Face folder")
      ->required();
  lora->add_option("--format", gl.opt.format, "peft (a folder) or gguf (a file)")
      ->capture_default_str();
  lora->add_option("--rank", gl.opt.rank, "LoRA rank r")->capture_default_str();
  lora->add_option("--alpha", gl.opt.alpha, "lora_alpha (scale = alpha / rank)")
      ->capture_default_str();
  lora->add_option("--targets", gl.targets,
                   "Comma-separated projections: q, k, v, o, gate, up, down, or all")
      ->capture_default_str();
  lora->add_option("--dtype", gl.dtype, "f32, f16 or bf16")->capture_default_str();
  lora->add_option("--std", gl.opt.std, "Standard deviation of A and B")->capture_default_str();
  lora->add_option("--seed", gl.opt.seed, "Random seed")->capture_default_str();
  lora->add_option("-o,--output", gl.opt.output, "Output folder (peft) or file (gguf)")->required();
  lora->callback([] { model_gen_lora(gl); });
}

}  // namespace pith::cli
