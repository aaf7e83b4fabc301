// Model presets of `pith model gen`: the shapes of popular models and the generic tiny shapes
// with each family's options at values that show on short prompts (see model_gen.h).
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "engine/architectures/architecture.h"
#include "engine/hf_loader.h"
#include "engine/model_loader.h"
#include "model_gen/model_gen.h"

namespace pith {

namespace {

// A shape preset: the generic ones take any family; a named model's is of its own family.
struct ShapePreset {
  const char* name;
  const char* arch;                                                 // "" for any family
  uint32_t n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff;  // head_dim 0: d / heads
  bool tied;
  float rope_theta;
  uint32_t context_length;
  const char* options;  // family option keys, as in config.json (JSON object)
};

constexpr ShapePreset kShapes[] = {
    {"tiny", "", 2, 64, 4, 2, 0, 192, true, 0, 4096, "{}"},
    // tiny with rows of 256: whole K-quant super-blocks, so the K-quant mixes apply.
    {"tiny256", "", 2, 256, 4, 2, 0, 768, true, 0, 4096, "{}"},
    {"llama3.2-1b", "llama", 16, 2048, 32, 8, 0, 8192, true, 500000, 131072, "{}"},
    {"llama3.2-3b", "llama", 28, 3072, 24, 8, 0, 8192, true, 500000, 131072, "{}"},
    {"llama3.1-8b", "llama", 32, 4096, 32, 8, 0, 14336, false, 500000, 131072, "{}"},
    {"mistral-7b", "mistral", 32, 4096, 32, 8, 128, 14336, false, 1e6, 32768, "{}"},
    {"qwen2.5-0.5b", "qwen2", 24, 896, 14, 2, 64, 4864, true, 1e6, 32768, "{}"},
    {"qwen2.5-1.5b", "qwen2", 28, 1536, 12, 2, 128, 8960, true, 1e6, 32768, "{}"},
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, true, 1e6, 40960, "{}"},
    {"qwen3-1.7b", "qwen3", 28, 2048, 16, 8, 128, 6144, true, 1e6, 40960, "{}"},
    {"phi3-mini", "phi3", 32, 3072, 32, 32, 96, 8192, false, 10000, 4096,
     R"({"sliding_window": 2047})"},
    {"gemma2-2b", "gemma2", 26, 2304, 8, 4, 256, 9216, true, 10000, 8192,
     R"({"sliding_window": 4096, "attn_logit_softcapping": 50.0,
         "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256})"},
    {"qwen3-30b-a3b", "qwen3moe", 48, 2048, 32, 4, 128, 6144, false, 1e6, 40960,
     R"({"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
         "norm_topk_prob": true})"},
    {"qwen1.5-moe-a2.7b", "qwen2moe", 24, 2048, 16, 16, 128, 5632, false, 1e6, 8192,
     R"({"num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
         "shared_expert_intermediate_size": 5632})"},
    {"gemma3-1b", "gemma3", 26, 1152, 4, 1, 256, 6912, true, 1e6, 32768,
     R"({"sliding_window": 512, "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0,
         "query_pre_attn_scalar": 256})"},
    {"gpt-oss-20b", "gpt-oss", 24, 2880, 64, 8, 64, 2880, false, 150000, 131072,
     R"({"num_local_experts": 32, "num_experts_per_tok": 4, "intermediate_size": 2880,
         "sliding_window": 128,
         "rope_scaling": {"rope_type": "yarn", "factor": 32.0,
                          "original_max_position_embeddings": 4096}})"},
    {"qwen3.5-0.8b", "qwen35", 24, 1024, 8, 2, 256, 3584, true, 1e7, 262144,
     R"({"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
         "linear_num_value_heads": 16, "linear_value_head_dim": 128,
         "full_attention_interval": 4, "partial_rotary_factor": 0.25})"},
    {"qwen3.5-2b", "qwen35", 24, 2048, 8, 2, 256, 6144, true, 1e7, 262144,
     R"({"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
         "linear_num_value_heads": 16, "linear_value_head_dim": 128,
         "full_attention_interval": 4, "partial_rotary_factor": 0.25})"},
};

// Family options of the generic tiny shapes: windows of 4 slots and soft-caps low enough to
// bend the random-weight scores and logits, so a short prompt tells them apart.
nlohmann::json tiny_family_options(const std::string& arch, uint32_t head_dim) {
  if (arch == "mistral" || arch == "phi3") return {{"sliding_window", 4}};
  if (arch == "gemma2")
    return {{"sliding_window", 4},
            {"attn_logit_softcapping", 0.1},
            {"final_logit_softcapping", 0.3},
            {"query_pre_attn_scalar", head_dim}};
  if (arch == "gemma3")
    return {{"sliding_window", 4},
            {"sliding_window_pattern", 6},
            {"rope_local_base_freq", 10000.0},
            {"query_pre_attn_scalar", head_dim}};
  // gemma4: 5 sliding layers and a global one with twice the head size, one KV head and V = K;
  // a quarter of the global pairs turn (proportional RoPE).
  if (arch == "gemma4")
    return {{"sliding_window", 4},
            {"global_head_dim", 2 * head_dim},
            {"num_global_key_value_heads", 1},
            {"attention_k_eq_v", true},
            {"final_logit_softcapping", 0.3},
            {"hidden_size_per_layer_input", 0},
            {"rope_parameters",
             {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
              {"full_attention",
               {{"rope_type", "proportional"},
                {"partial_rotary_factor", 0.25},
                {"rope_theta", 1000000.0}}}}}};
  // MoE: 8 experts of width d/2, 2 per token; qwen2moe's shared expert as wide as the dense FFN.
  if (arch == "qwen3moe")
    return {{"num_experts", 8},
            {"num_experts_per_tok", 2},
            {"moe_intermediate_size", 32},
            {"norm_topk_prob", true}};
  // gpt-oss: 8 experts of width d/2, 2 per token, a window of 4 on every other layer, and
  // YaRN as the real model has it (factor 32 over 4096 positions), untied LM head.
  if (arch == "gpt-oss")
    return {{"num_local_experts", 8},
            {"num_experts_per_tok", 2},
            {"intermediate_size", 32},
            {"sliding_window", 4},
            {"tie_word_embeddings", false},
            {"rope_scaling",
             {{"rope_type", "yarn"},
              {"factor", 32.0},
              {"original_max_position_embeddings", 4096},
              {"beta_fast", 32.0},
              {"beta_slow", 1.0}}}};
  // (llama.cpp loads qwen2moe only with an LM head of its own, as the real checkpoints have.)
  if (arch == "qwen2moe")
    return {{"num_experts", 8},
            {"num_experts_per_tok", 2},
            {"moe_intermediate_size", 32},
            {"shared_expert_intermediate_size", 64},
            {"tie_word_embeddings", false}};
  // Hybrid: 3 DeltaNet layers and 1 attention layer; 4 value heads on 2 key heads, so the
  // grouped (HF) and tiled (GGUF) head orders differ; half of each head rotates.
  if (arch == "qwen35" || arch == "qwen35moe") {
    nlohmann::json o = {{"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 16},
                        {"linear_num_key_heads", 2},   {"linear_num_value_heads", 4},
                        {"linear_value_head_dim", 16}, {"full_attention_interval", 4},
                        {"partial_rotary_factor", 0.5}};
    if (arch == "qwen35moe") {  // + 8 experts of width d/2, 2 per token, and a shared expert
      o["num_experts"] = 8;
      o["num_experts_per_tok"] = 2;
      o["moe_intermediate_size"] = 32;
      o["shared_expert_intermediate_size"] = 64;
      o["norm_topk_prob"] = true;
    }
    return o;
  }
  return nlohmann::json::object();
}

std::string shape_names() {
  std::string out;
  for (const ShapePreset& p : kShapes) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

}  // namespace

ModelPreset model_preset(const std::string& name, const std::string& arch_name,
                         const std::vector<std::string>& overrides) {
  const ShapePreset* shape = nullptr;
  for (const ShapePreset& p : kShapes)
    if (name == p.name) shape = &p;
  if (!shape) fail("unknown model preset '{}' ({})", name, shape_names());
  std::string family = arch_name.empty() ? (*shape->arch ? shape->arch : "llama") : arch_name;
  const Architecture* arch = find_architecture(family);
  if (!arch)
    fail("unknown architecture '{}' (pith supports {})", family, supported_architecture_names());
  if (*shape->arch && family != shape->arch)
    fail("preset {} is a {} model; use a generic shape (tiny, tiny256) for --arch {}", name,
         shape->arch, family);
  const bool generic = *shape->arch == 0;
  ModelPreset p;
  p.name = name;
  ModelConfig& c = p.config;
  c.architecture = family;
  c.rms_eps = family.starts_with("gemma") || family.starts_with("qwen") ? 1e-6f : 1e-5f;
  // gemma3's tiny shape has 6 layers so that the last one is a full-attention layer, qwen35's 4
  // so that it has one.
  c.n_layers = generic && family.starts_with("gemma") && family != "gemma2" ? 6
               : generic && family.starts_with("qwen35")                    ? 4
                                                                            : shape->n_layers;
  c.d_model = shape->d_model, c.n_heads = shape->n_heads, c.n_kv_heads = shape->n_kv_heads;
  c.d_ff = shape->d_ff;
  // KEY=VALUE config.json options over the preset's (VALUE is JSON; a bare word is a string).
  nlohmann::json user = nlohmann::json::object();
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      fail("model option '{}' is not KEY=VALUE (a config.json key and a JSON value)", o);
    const std::string key = o.substr(0, eq), text = o.substr(eq + 1);
    nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    user[key] = value.is_discarded() ? nlohmann::json(text) : value;
  }
  // The shape's own sizes, before anything derived from them.
  auto size_option = [&](const char* key, uint32_t& field) {
    if (!user.contains(key)) return;
    if (!user[key].is_number_unsigned() || user[key].get<uint32_t>() == 0)
      fail("model option {} must be a positive integer", key);
    field = user[key].get<uint32_t>();
  };
  uint32_t head_dim = shape->head_dim;
  size_option("hidden_size", c.d_model);
  size_option("num_attention_heads", c.n_heads);
  size_option("num_key_value_heads", c.n_kv_heads);
  size_option("intermediate_size", c.d_ff);
  size_option("head_dim", head_dim);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("model options: {} attention heads are not a multiple of {} KV heads", c.n_heads,
         c.n_kv_heads);
  if (!head_dim && c.d_model % c.n_heads != 0)
    fail("model options: hidden_size {} is not a multiple of {} heads (or set head_dim)", c.d_model,
         c.n_heads);
  c.head_dim = head_dim ? head_dim : c.d_model / c.n_heads;
  c.tied_output = shape->tied;  // gemma's configure ties it whatever the shape says
  c.context_length = shape->context_length;
  c.rope_theta = shape->rope_theta > 0                              ? shape->rope_theta
                 : family == "llama"                                ? 500000.0f
                 : family == "gemma3" || family.starts_with("qwen") ? 1e6f
                                                                    : 10000.0f;
  if (family == "llama") {  // Llama 3's rope scaling, as its checkpoints carry it
    p.rope_scaling = Llama3RopeScaling{};
    const Llama3RopeScaling& s = *p.rope_scaling;
    c.rope_freq_factors =
        llama3_rope_freq_factors(c.head_dim, c.rope_theta, s.factor, s.low_freq_factor,
                                 s.high_freq_factor, s.original_context);
  }
  nlohmann::json options =
      generic ? tiny_family_options(family, c.head_dim) : nlohmann::json::parse(shape->options);
  for (const auto& [key, value] : user.items()) options[key] = value;
  if (options.contains("num_hidden_layers")) {
    if (!options["num_hidden_layers"].is_number_unsigned() ||
        options["num_hidden_layers"].get<uint32_t>() == 0)
      fail("model option num_hidden_layers must be a positive integer");
    c.n_layers = options["num_hidden_layers"].get<uint32_t>();
  }
  if (options.contains("tie_word_embeddings"))
    c.tied_output = options["tie_word_embeddings"].get<bool>();
  if (options.contains("pooling")) {  // an embedding model's (ModelConfig::pooling)
    const nlohmann::json& v = options["pooling"];
    if (!v.is_string() || (v != "last" && v != "mean" && v != "cls"))
      fail("model option pooling must be last, mean or cls");
    c.pooling = v.get<std::string>();
  }
  std::set<std::string> read_by_family;
  arch->configure(c, *hf_config_keys(options, "preset " + name, &read_by_family));
  if (options.contains("partial_rotary_factor"))
    c.rope_dim = static_cast<uint32_t>(options["partial_rotary_factor"].get<double>() * c.head_dim);
  if (options.contains("max_position_embeddings")) {
    if (!options["max_position_embeddings"].is_number_unsigned())
      fail("model option max_position_embeddings must be a positive integer");
    c.context_length = options["max_position_embeddings"].get<uint32_t>();
  }
  // null: none; {"rope_type": "yarn" | "longrope", ...} (longrope's original context may sit at
  // the top level, as in Phi-3's config.json).
  if (options.contains("rope_scaling")) {
    nlohmann::json rs = options["rope_scaling"];
    const std::string type = rs.is_null() ? "" : rs.value("rope_type", rs.value("type", ""));
    if (!rs.is_null() && type != "yarn" && type != "longrope")
      fail("model option rope_scaling: only yarn, longrope (or null) can be set this way");
    if (type == "longrope" && !rs.contains("original_max_position_embeddings") &&
        options.contains("original_max_position_embeddings"))
      rs["original_max_position_embeddings"] = options["original_max_position_embeddings"];
    p.rope_scaling.reset();
    c.rope_freq_factors.clear();
    apply_rope_scaling(c, rs, "model option rope_scaling");
  }
  // An option nothing above reads would be silently dropped: refuse it by name.
  static const std::set<std::string> kReadHere = {"hidden_size",
                                                  "num_attention_heads",
                                                  "num_key_value_heads",
                                                  "intermediate_size",
                                                  "head_dim",
                                                  "num_hidden_layers",
                                                  "tie_word_embeddings",
                                                  "pooling",
                                                  "partial_rotary_factor",
                                                  "max_position_embeddings",
                                                  "rope_scaling",
                                                  "original_max_position_embeddings"};
  for (const auto& [key, value] : user.items())
    if (!kReadHere.contains(key) && !read_by_family.contains(key))
      fail(
          "model option {} is not a {} option pith model gen reads (a config.json key of the "
          "family, or a shape key: hidden_size, intermediate_size, num_attention_heads, "
          "num_key_value_heads, head_dim, num_hidden_layers)",
          key, family);
  return p;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (const ShapePreset& p : kShapes) out.push_back(p.name);
  return out;
}

}  // namespace pith
