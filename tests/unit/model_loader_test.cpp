// load_model on the oracle's tiny GGUFs (config, shapes, dtypes, rope factors, tied/untied), on
// generated HF folders, and on malformed inputs (every failure is a pith::Error naming the file
// and the problem).
#include "engine/model_loader.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <array>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "common/error.h"
#include "engine/gguf_loader.h"
#include "engine/hf_loader.h"
#include "engine/kernels/matmul.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model_gen/model_gen.h"

namespace pith {

namespace {
const std::string kModels = std::string(PITH_TEST_DATA) + "/models/";
const LoadOptions kQuiet{.quiet = true};

// Per-process scratch folder, removed when the test program exits.
const std::filesystem::path& temp_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir()
        : path(std::filesystem::temp_directory_path() /
               ("pith_loader_test_" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_temp(const std::vector<char>& bytes, const std::string& name) {
  auto path = temp_dir() / name;
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

// Expects load_model(path) to throw a pith::Error whose message contains every `parts`.
void expect_load_error(const std::string& path, std::vector<std::string> parts) {
  try {
    load_model(path, kQuiet);
    ADD_FAILURE() << "expected an error loading " << path;
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}
}  // namespace

TEST(ModelLoader, LoadsTinyF32Gguf) {
  auto w = load_model(kModels + "tiny-f32.gguf", kQuiet);
  const ModelConfig& c = w->config;
  EXPECT_EQ(w->format, "gguf");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny-f32");
  EXPECT_EQ(c.n_layers, 2u);
  EXPECT_EQ(c.d_model, 64u);
  EXPECT_EQ(c.n_heads, 4u);
  EXPECT_EQ(c.n_kv_heads, 2u);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.d_ff, 192u);
  EXPECT_EQ(c.vocab_size, 1000u);
  EXPECT_EQ(c.context_length, 4096u);
  EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-9f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.tied_output);
  ASSERT_EQ(c.rope_freq_factors.size(), 8u);
  // rope_freqs.weight matches the Llama 3 formula (factor 32, 1, 4, 8192).
  auto expect = llama3_rope_freq_factors(16, 500000.0f, 32, 1, 4, 8192);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(c.rope_freq_factors[i], expect[i], 1e-6f) << i;
  EXPECT_FLOAT_EQ(c.rope_freq_factors[4], 3.2922626f);

  ASSERT_EQ(w->layers.size(), 2u);
  const LayerWeights& l = w->layers[1];
  EXPECT_EQ(l.wq.rows, 64u);
  EXPECT_EQ(l.wk.rows, 32u);
  EXPECT_EQ(l.wv.rows, 32u);
  EXPECT_EQ(l.wo.cols, 64u);
  EXPECT_EQ(l.w_gate.rows, 192u);
  EXPECT_EQ(l.w_down.cols, 192u);
  EXPECT_EQ(l.attn_norm.size(), 64u);
  EXPECT_EQ(w->token_embd.rows, 1000u);
  EXPECT_EQ(w->output.data, w->token_embd.data);
  EXPECT_EQ(dtype_summary(*w), "f32");
  // Matrices point into the mapping: the bytes are the file's.
  GGUFFile f(kModels + "tiny-f32.gguf");
  const auto* t = f.find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::memcmp(l.wk.data, t->data, t->n_bytes), 0);
  // Norm weights are 1 + 0.1 N(0,1): close to one.
  for (float x : l.ffn_norm) EXPECT_LT(std::fabs(x - 1.0f), 0.6f);
  // Parameters: embd + per layer (q,k,v,o, gate/up/down, 2 norms) + output_norm.
  size_t per_layer = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 192 * 64 + 2 * 64;
  EXPECT_EQ(w->n_params(), 1000u * 64 + 2 * per_layer + 64);
  EXPECT_EQ(w->weight_bytes(), (1000u * 64 + 2 * (per_layer - 128)) * 4);
}

TEST(ModelLoader, LoadsUntiedAndQuantisedGguf) {
  auto u = load_model(kModels + "tiny-untied-f32.gguf", kQuiet);
  EXPECT_FALSE(u->config.tied_output);
  EXPECT_EQ(u->config.n_kv_heads, 4u);
  EXPECT_EQ(u->config.d_ff, 160u);
  EXPECT_TRUE(u->config.rope_freq_factors.empty());
  EXPECT_FLOAT_EQ(u->config.rope_theta, 10000.0f);
  EXPECT_NE(u->output.data, u->token_embd.data);
  EXPECT_EQ(u->output.rows, 1000u);

  auto f32 = load_model(kModels + "tiny-f32.gguf", kQuiet);
  for (const char* name : {"tiny-bf16.gguf", "tiny-q8_0.gguf"}) {
    auto q = load_model(kModels + name, kQuiet);
    EXPECT_EQ(dtype_summary(*q),
              std::string(name).find("bf16") != std::string::npos ? "bf16" : "q8_0");
    // Same draws as tiny-f32, rounded: dequantised rows are close.
    std::vector<float> a(64), b(64);
    const WeightMatrix& m = q->layers[0].w_up;
    const WeightMatrix& r = f32->layers[0].w_up;
    double worst = 0;
    for (size_t row = 0; row < m.rows; ++row) {
      dequantize_row(m.dtype, m.row(row), a.data(), 64);
      dequantize_row(r.dtype, r.row(row), b.data(), 64);
      for (size_t i = 0; i < 64; ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    }
    EXPECT_LT(worst, 3e-3) << name;
    EXPECT_EQ(q->layers[0].ffn_norm, f32->layers[0].ffn_norm) << name;  // norms stay f32
  }
}

TEST(ModelLoader, RopeFactorsFollowLlama3Formula) {
  // Llama 3.2 1B: head_dim 64, theta 500000, factor 32, 1, 4, 8192.
  auto f = llama3_rope_freq_factors(64, 500000.0f, 32, 1, 4, 8192);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[31], 32.0f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  EXPECT_THROW(llama3_rope_freq_factors(63, 500000.0f, 32, 1, 4, 8192), Error);
  EXPECT_THROW(llama3_rope_freq_factors(64, 500000.0f, 32, 4, 1, 8192), Error);
}

TEST(ModelLoader, MissingPathAndTruncatedFileAreClearErrors) {
  expect_load_error("/nonexistent/model.gguf", {"/nonexistent/model.gguf"});
  auto bytes = read_all(kModels + "tiny-f32.gguf");
  for (size_t cut : {size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    auto b = bytes;
    b.resize(cut);
    auto path = write_temp(b, "trunc.gguf");
    expect_load_error(path, {path});
  }
}

TEST(ModelLoader, RandomCorruptionNeverCrashes) {
  auto bytes = read_all(kModels + "tiny-q8_0.gguf");
  uint64_t s = 12345;
  for (int trial = 0; trial < 200; ++trial) {
    auto b = bytes;
    for (int k = 0; k < 4; ++k) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      size_t pos = (s >> 33) % std::min<size_t>(b.size(), 4096);  // header region
      b[pos] = static_cast<char>(s >> 13);
    }
    auto path = write_temp(b, "corrupt.gguf");
    try {
      auto w = load_model(path, kQuiet);
      EXPECT_EQ(w->layers.size(), w->config.n_layers);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(ModelLoader, HfRowPermutationRoundTrips) {
  for (uint32_t hd : {2u, 16u, 64u}) {
    std::vector<bool> seen(4 * hd);
    for (size_t r = 0; r < 4 * hd; ++r) {
      size_t h = hf_row_for_pith_row(r, hd);
      EXPECT_EQ(h / hd, r / hd);
      EXPECT_EQ(pith_row_for_hf_row(h, hd), r);
      seen[h] = true;
    }
    for (bool b : seen) EXPECT_TRUE(b);
  }
  // pith row 2i <- HF row i; pith row 2i+1 <- HF row hd/2 + i (head 1 of hd 16).
  EXPECT_EQ(hf_row_for_pith_row(16 + 4, 16), 16u + 2);
  EXPECT_EQ(hf_row_for_pith_row(16 + 5, 16), 16u + 8 + 2);
}

namespace {

// tiny-f32.gguf rewritten with metadata overrides, dropped tensors and re-declared dims.
std::string rewrite_gguf(const std::string& name, const std::map<std::string, GGUFValue>& overrides,
                         const std::set<std::string>& drop = {},
                         const std::map<std::string, std::vector<uint64_t>>& dims = {},
                         uint32_t alignment = 32) {
  GGUFFile src(kModels + "tiny-f32.gguf");
  auto path = temp_dir() / (name + ".gguf");
  GGUFWriter w(path.string(), alignment);
  for (const auto& [k, v] : src.metadata()) w.set(k, overrides.count(k) ? overrides.at(k) : v);
  for (const auto& [k, v] : overrides) w.set(k, v);
  for (const auto& t : src.tensors())
    if (!drop.count(t.name))
      w.add_tensor(t.name, dims.count(t.name) ? dims.at(t.name) : t.dims, t.dtype);
  for (const auto& t : src.tensors())
    if (!drop.count(t.name)) w.write(t.data, t.n_bytes);
  w.finish();
  return path.string();
}

GGUFValue u32(uint32_t v) {
  return {GGUFType::U32, uint64_t{v}};
}
GGUFValue str(const std::string& v) {
  return {GGUFType::STRING, v};
}
GGUFValue f32(float v) {
  return {GGUFType::F32, double{v}};
}

// A freshly generated tiny HF folder (the oracle's 1000-token vocab) to break in one place.
std::string hf_folder(const std::string& name, const std::string& arch = "llama") {
  auto dir = temp_dir() / name;
  std::filesystem::remove_all(dir);
  ModelGenOptions o;
  o.arch = arch;
  o.vocab_path = kModels + "tiny-f32.gguf";
  o.format = "hf";
  o.dtype = DType::BF16;
  o.output = dir.string();
  o.quiet = true;
  ThreadPool pool(1);
  generate_model(o, pool);
  return dir.string();
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto path = std::filesystem::path(dir) / "config.json";
  nlohmann::json j;
  {
    std::ifstream in(path);
    j = nlohmann::json::parse(in);
  }
  edit(j);
  std::ofstream(path) << j.dump(2);
}

}  // namespace

TEST(ModelLoader, RewrittenGgufRoundTrips) {
  auto w = load_model(rewrite_gguf("same", {}), kQuiet);
  auto ref = load_model(kModels + "tiny-f32.gguf", kQuiet);
  EXPECT_EQ(std::memcmp(w->layers[1].w_down.data, ref->layers[1].w_down.data, 64 * 192 * 4), 0);
  EXPECT_EQ(w->config.rope_freq_factors, ref->config.rope_freq_factors);
}

TEST(ModelLoader, UnalignedGgufTensorsAreCopiedNotMisread) {
  // general.alignment 1 packs tensors right after the header: f32 data at odd addresses.
  auto p = rewrite_gguf("align1", {}, {}, {}, 1);
  GGUFFile f(p);
  EXPECT_EQ(f.get_uint("general.alignment"), 1u);
  bool misaligned = false;
  for (const auto& t : f.tensors()) misaligned |= reinterpret_cast<uintptr_t>(t.data) % 4 != 0;
  auto w = load_model(p, kQuiet);
  auto ref = load_model(kModels + "tiny-f32.gguf", kQuiet);
  EXPECT_TRUE(misaligned);  // the header length makes the data section odd-aligned
  EXPECT_GT(w->storage.size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->layers[0].wq.data) % 4, 0u);
  EXPECT_EQ(std::memcmp(w->layers[0].wq.data, ref->layers[0].wq.data, 64 * 64 * 4), 0);
  EXPECT_EQ(w->layers[1].ffn_norm, ref->layers[1].ffn_norm);
  EXPECT_EQ(w->config.rope_freq_factors, ref->config.rope_freq_factors);
}

TEST(ModelLoader, BadGgufModelsNameTheProblem) {
  auto p = rewrite_gguf("ffn", {{"llama.feed_forward_length", u32(128)}});
  expect_load_error(p, {p, "blk.0.ffn_gate.weight", "expected [64, 128]"});
  p = rewrite_gguf("drop", {}, {"blk.1.ffn_down.weight"});
  expect_load_error(p, {p, "missing tensor 'blk.1.ffn_down.weight'"});
  p = rewrite_gguf("dims", {}, {}, {{"blk.0.ffn_up.weight", {192, 64}}});
  expect_load_error(p, {p, "'blk.0.ffn_up.weight' has shape [192, 64], expected [64, 192]"});
  p = rewrite_gguf("arch", {{"general.architecture", str("gpt2")}});
  expect_load_error(p, {p, "unsupported architecture 'gpt2'", "llama, mistral, qwen2, qwen3"});
  p = rewrite_gguf("kv", {{"llama.attention.head_count_kv", u32(3)}});
  expect_load_error(p, {p, "not a multiple of n_kv_heads 3"});
  p = rewrite_gguf("type", {{"llama.block_count", str("two")}});
  expect_load_error(p, {p, "llama.block_count"});
  p = rewrite_gguf("longrope", {{"llama.rope.scaling.type", str("longrope")}});
  expect_load_error(p, {p, "rope scaling type 'longrope' is not supported"});
  p = rewrite_gguf("yarn_log", {{"llama.rope.scaling.type", str("yarn")},
                                {"llama.rope.scaling.yarn_log_multiplier", f32(0.1f)}});
  expect_load_error(p, {p, "log multiplier"});
  p = rewrite_gguf("yarn_ext", {{"llama.rope.scaling.type", str("yarn")},
                                {"llama.rope.scaling.yarn_ext_factor", f32(0.5f)}});
  expect_load_error(p, {p, "yarn_ext_factor"});
  p = rewrite_gguf("nolayers", {{"llama.block_count", u32(0)}});
  expect_load_error(p, {p, "n_layers = 0"});
  p = rewrite_gguf("rope", {}, {}, {{"rope_freqs.weight", {4, 2}}});
  expect_load_error(p, {p, "rope_freqs.weight"});
}

TEST(ModelLoader, LoadsGeneratedHfFolder) {
  auto dir = hf_folder("hf_ok");
  auto w = load_model(dir, kQuiet);
  EXPECT_EQ(w->format, "hf");
  EXPECT_EQ(w->config.n_layers, 2u);
  EXPECT_EQ(w->config.head_dim, 16u);
  EXPECT_TRUE(w->config.tied_output);
  EXPECT_EQ(w->config.rope_freq_factors, llama3_rope_freq_factors(16, 500000.0f, 32, 1, 4, 8192));
  EXPECT_EQ(dtype_summary(*w), "bf16");
  SafetensorsFile st(dir + "/model.safetensors");
  const auto* v = st.find("model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(std::memcmp(w->layers[0].wv.data, v->data, v->n_bytes), 0);
  const auto* k = st.find("model.layers.1.self_attn.k_proj.weight");
  size_t rb = w->layers[1].wk.row_bytes();
  for (size_t r = 0; r < 32; ++r)
    EXPECT_EQ(std::memcmp(w->layers[1].wk.row(r), k->data + hf_row_for_pith_row(r, 16) * rb, rb), 0)
        << r;
}

// The config of a tiny `arch` model generated with config options, loaded back from GGUF
// (index 0) and HF (index 1).
std::array<ModelConfig, 2> config_from_both_formats(const std::string& arch,
                                                    const std::vector<std::string>& options,
                                                    const std::string& name) {
  std::array<ModelConfig, 2> got;
  for (int f = 0; f < 2; ++f) {
    ModelGenOptions o;
    o.arch = arch;
    o.options = options;
    o.vocab_path = kModels + "tiny-f32.gguf";
    o.format = f == 0 ? "gguf" : "hf";
    o.output = (temp_dir() / (f == 0 ? name + ".gguf" : name + "_hf")).string();
    o.quiet = true;
    ThreadPool pool(1);
    generate_model(o, pool);
    got[f] = load_model(o.output, kQuiet)->config;
  }
  return got;
}

// YaRN rope scaling as llama.cpp's converter writes it (GGUF rope.scaling.*) and as
// transformers reads it (config.json rope_scaling): the same parameters from both formats of
// one generated model, defaults filled in (betas 32/1, temperature 1 + 0.1 ln factor), an
// explicit attention factor kept in both, and DeepSeek's mscale pair as transformers combines it.
TEST(ModelLoader, YarnRopeScalingFromBothFormats) {
  for (const std::string attention : {"", ",\"attention_factor\":1.5"}) {
    const std::string opt =
        "rope_scaling={\"rope_type\":\"yarn\",\"factor\":4,"
        "\"original_max_position_embeddings\":4096" +
        attention + "}";
    for (const ModelConfig& c : config_from_both_formats("qwen2", {opt}, "yarn")) {
      const YarnRope& y = c.yarn;
      EXPECT_EQ(y.factor, 4.0f);
      EXPECT_EQ(y.original_context, 4096u);
      EXPECT_EQ(y.beta_fast, 32.0f);
      EXPECT_EQ(y.beta_slow, 1.0f);
      EXPECT_NEAR(y.mscale, attention.empty() ? 1 + 0.1 * std::log(4.0) : 1.5, 1e-6);
    }
  }
  auto dir = hf_folder("hf_yarn_deepseek");
  edit_config(dir, [](nlohmann::json& j) {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", 40},
                         {"mscale", 0.707},
                         {"mscale_all_dim", 0.707},
                         {"original_max_position_embeddings", 64}};
  });
  EXPECT_NEAR(load_model(dir, kQuiet)->config.yarn.mscale, 1.0, 1e-6);
  edit_config(dir, [](nlohmann::json& j) { j["rope_scaling"].erase("factor"); });
  expect_load_error(dir, {"config.json", "missing 'factor'"});
}

// Phi-3.5 / Phi-4-mini LongRoPE as llama.cpp's converter writes it (rope_factors_long/short
// tensors, rope.scaling.original_context_length and attn_factor) and as Phi-3's config.json
// holds it (rope_scaling type longrope, original_max_position_embeddings at the top level):
// both formats of one generated model give the same factors, the long set for a context above
// the original, the short one otherwise, and the attention factor sqrt(1 + ln s / ln orig).
TEST(ModelLoader, LongRopeFromBothFormats) {
  const std::string factors =
      "\"long_factor\":[1,1.5,2.5,4,8,13],\"short_factor\":[1,1.1,1.2,1.3,1.5,1.7]";
  for (const uint32_t orig : {16u, 4096u}) {
    const auto got = config_from_both_formats(
        "phi3",
        {"partial_rotary_factor=0.75", "original_max_position_embeddings=" + std::to_string(orig),
         "rope_scaling={\"type\":\"longrope\"," + factors + "}"},
        "longrope");
    for (const ModelConfig& c : got) {
      ASSERT_EQ(c.context_length, 4096u);
      EXPECT_EQ(c.rotary_dim(), 12u);
      EXPECT_EQ(c.longrope.original_context, orig);
      EXPECT_EQ(c.longrope.long_factors, (std::vector<float>{1, 1.5f, 2.5f, 4, 8, 13}));
      EXPECT_EQ(c.rope_freq_factors,
                orig < 4096 ? c.longrope.long_factors : c.longrope.short_factors);
      EXPECT_NEAR(c.rope_attn_factor, orig < 4096 ? std::sqrt(3.0) : 1.0, 1e-6);
    }
  }
  // The served context comes from max_position_embeddings: 8192 over 16 gives the factor
  // sqrt(1 + ln 512 / ln 16).
  for (const ModelConfig& c :
       config_from_both_formats("phi3",
                                {"partial_rotary_factor=0.75", "max_position_embeddings=8192",
                                 "original_max_position_embeddings=16",
                                 "rope_scaling={\"type\":\"longrope\"," + factors + "}"},
                                "longrope_8k")) {
    EXPECT_EQ(c.context_length, 8192u);
    EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1 + std::log(512.0) / std::log(16.0)), 1e-6);
  }
  // transformers v5 saves it as rope_parameters (rope_type, the original context inside).
  auto dir = hf_folder("hf_longrope_v5");
  edit_config(dir, [&](nlohmann::json& j) {
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", "longrope"},
                            {"rope_theta", j["rope_theta"]},
                            {"long_factor", std::vector<float>(8, 2.0f)},
                            {"short_factor", std::vector<float>(8, 1.0f)},
                            {"original_max_position_embeddings", 1024}};
    j["max_position_embeddings"] = 4096;
  });
  const ModelConfig v5 = load_model(dir, kQuiet)->config;
  EXPECT_EQ(v5.rope_freq_factors, std::vector<float>(8, 2.0f));
  EXPECT_NEAR(v5.rope_attn_factor, std::sqrt(1 + std::log(4.0) / std::log(1024.0)), 1e-6);
  dir = hf_folder("hf_longrope");
  edit_config(dir, [&](nlohmann::json& j) {
    j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1, 2}}, {"short_factor", {1, 2}}};
    j["original_max_position_embeddings"] = 64;
  });
  expect_load_error(dir, {"config.json", "LongRoPE factors have 2 (long) and 2 (short) entries"});
  edit_config(dir, [&](nlohmann::json& j) { j["rope_scaling"].erase("short_factor"); });
  expect_load_error(dir, {"config.json", "needs 'short_factor'"});
}

// Gemma 2/3 as transformers v5 saves them: RoPE per layer type under rope_parameters. The
// global base, Gemma 3 4B+'s linear factor and the sliding layers' base come out as from the v4
// keys (the family's defaults once stood in for them: the factor 8 was lost).
TEST(ModelLoader, NestedRopeParametersOfGemma) {
  ModelConfig got[2];
  for (int v5 = 0; v5 < 2; ++v5) {
    auto dir = hf_folder(v5 ? "hf_gemma3_v5" : "hf_gemma3_v4", "gemma3");
    edit_config(dir, [&](nlohmann::json& j) {
      if (v5) {
        j.erase("rope_theta");
        j.erase("rope_scaling");
        j.erase("rope_local_base_freq");
        j["rope_parameters"] = {
            {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 5e5}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
      } else {
        j["rope_theta"] = 5e5;
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
        j["rope_local_base_freq"] = 2e4;
      }
    });
    got[v5] = load_model(dir, kQuiet)->config;
  }
  for (const ModelConfig& c : got) {
    EXPECT_EQ(c.rope_theta, 5e5f);
    EXPECT_EQ(c.rope_theta_local, 2e4f);
    EXPECT_EQ(c.rope_freq_factors, std::vector<float>(c.rotary_dim() / 2, 8.0f));
  }
}

TEST(ModelLoader, BadHfFoldersNameTheProblem) {
  namespace fs = std::filesystem;
  auto dir = hf_folder("hf_missing_key");
  edit_config(dir, [](nlohmann::json& j) { j.erase("hidden_size"); });
  expect_load_error(dir, {"config.json", "missing key 'hidden_size'"});

  dir = hf_folder("hf_arch");
  edit_config(dir, [](nlohmann::json& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
  expect_load_error(
      dir, {"config.json", "unsupported architecture 'GPT2LMHeadModel'",
            "LlamaForCausalLM, MistralForCausalLM, MinistralForCausalLM, Qwen2ForCausalLM"});

  dir = hf_folder("hf_attention_bias");
  edit_config(dir, [](nlohmann::json& j) { j["attention_bias"] = true; });
  expect_load_error(dir, {"config.json", "attention_bias = true", "not supported"});

  dir = hf_folder("hf_mlp_bias");
  edit_config(dir, [](nlohmann::json& j) { j["mlp_bias"] = true; });
  expect_load_error(dir, {"config.json", "mlp_bias = true", "not supported"});

  dir = hf_folder("hf_type");
  edit_config(dir, [](nlohmann::json& j) { j["num_key_value_heads"] = "two"; });
  expect_load_error(dir, {"config.json", "'num_key_value_heads' must be a non-negative integer"});

  dir = hf_folder("hf_rope");
  edit_config(dir, [](nlohmann::json& j) { j["rope_scaling"]["rope_type"] = "dynamic"; });
  expect_load_error(dir, {"config.json", "rope_scaling type 'dynamic' is not supported"});

  dir = hf_folder("hf_rope_key");
  edit_config(dir, [](nlohmann::json& j) { j["rope_scaling"].erase("low_freq_factor"); });
  expect_load_error(dir, {"config.json", "missing 'low_freq_factor'"});

  dir = hf_folder("hf_shape");
  edit_config(dir, [](nlohmann::json& j) { j["intermediate_size"] = 128; });
  expect_load_error(
      dir, {"model.safetensors",
            "'model.layers.0.mlp.gate_proj.weight' has shape [192, 64], expected [128, 64]"});

  dir = hf_folder("hf_untied");
  edit_config(dir, [](nlohmann::json& j) { j["tie_word_embeddings"] = false; });
  expect_load_error(dir, {dir, "missing tensor 'lm_head.weight'"});

  dir = hf_folder("hf_badjson");
  std::ofstream(fs::path(dir) / "config.json") << "{\"hidden_size\": ";
  expect_load_error(dir, {"config.json", "not valid JSON"});

  dir = hf_folder("hf_noconfig");
  fs::remove(fs::path(dir) / "config.json");
  expect_load_error(dir, {dir, "no config.json"});

  dir = hf_folder("hf_noweights");
  fs::remove(fs::path(dir) / "model.safetensors");
  expect_load_error(dir, {dir, "no model.safetensors"});

  dir = hf_folder("hf_trunc");
  auto st = (fs::path(dir) / "model.safetensors").string();
  fs::resize_file(st, fs::file_size(st) - 100);
  expect_load_error(dir, {st, "extends past end of file"});

  dir = hf_folder("hf_index");
  std::ofstream(fs::path(dir) / "model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}})";
  expect_load_error(dir, {"model-00001-of-00002.safetensors", "cannot open"});

  dir = hf_folder("hf_escape");
  std::ofstream(fs::path(dir) / "model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "../etc/passwd"}})";
  expect_load_error(dir, {"index.json", "is not a file in the folder"});

  // A weight stored as I32 (not a float type pith computes with).
  dir = hf_folder("hf_dtype");
  std::string hdr =
      R"({"model.embed_tokens.weight":{"dtype":"I32","shape":[1000,64],"data_offsets":[0,256000]}})";
  {
    std::ofstream out(fs::path(dir) / "model.safetensors", std::ios::binary);
    uint64_t n = hdr.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << hdr << std::string(256000, '\0');
  }
  expect_load_error(dir, {"model.safetensors", "unsupported dtype I32"});
}

TEST(GGUFWriter, StreamsAcrossTensorsWithPaddingAndRoundTrips) {
  auto path = (temp_dir() / "writer.gguf").string();
  std::vector<float> a(3 * 5), b(7);  // 60 and 28 bytes: b starts at the next 32-byte boundary
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  std::vector<std::string> strs = {"x", "", "zz"};
  {
    GGUFWriter w(path);
    w.set_string("general.architecture", "test");
    w.set_u32("n", 7);
    w.set_f32("f", 0.5f);
    w.set_bool("b", true);
    GGUFArray arr;
    arr.elem_type = GGUFType::STRING;
    arr.count = strs.size();
    arr.strings = strs;
    w.set("s", {GGUFType::ARRAY, arr});
    w.add_tensor("a", {5, 3}, DType::F32);
    w.add_tensor("b", {7}, DType::F32);
    std::vector<char> both(88);
    std::memcpy(both.data(), a.data(), 60);
    std::memcpy(both.data() + 60, b.data(), 28);
    w.write(both.data(), 50);  // one call spanning the end of 'a' and the start of 'b'
    w.write(both.data() + 50, 38);
    EXPECT_THROW(w.write(both.data(), 1), Error);  // nothing left to write
    w.finish();
  }
  GGUFFile f(path);
  EXPECT_EQ(f.get_uint("n"), 7u);
  EXPECT_EQ(f.get_float("f"), 0.5);
  EXPECT_TRUE(f.get_bool_or("b", false));
  EXPECT_EQ(f.get_string_array("s"), strs);
  const auto* ta = f.find_tensor("a");
  const auto* tb = f.find_tensor("b");
  ASSERT_TRUE(ta && tb);
  EXPECT_EQ(ta->dims, (std::vector<uint64_t>{5, 3}));
  EXPECT_EQ(tb->offset, 64u);
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 60), 0);
  EXPECT_EQ(std::memcmp(tb->data, b.data(), 28), 0);

  GGUFWriter bad(path + ".bad");
  EXPECT_THROW(bad.add_tensor("q", {33}, DType::Q8_0), Error);  // not a whole block
  EXPECT_THROW(bad.set_u32("general.alignment", 64), Error);    // fixed by the constructor
  bad.add_tensor("x", {4}, DType::F32);
  EXPECT_THROW(bad.finish(), Error);  // declared data never written
}

}  // namespace pith
