// pith model gen: presets, the normal sampler, and generated models in every dtype x format
// loading back with the requested shapes; GGUF and HF outputs of one seed hold identical
// weights after the rotary row permutation.
#include "model_gen/model_gen.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <tuple>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "engine/kernels/matmul.h"
#include "engine/model_loader.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model_gen/normal_rng.h"

namespace pith {

namespace {
namespace fs = std::filesystem;
// The oracle's 1000-token vocabulary keeps generated tiny models small.
const std::string kVocab = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
const LoadOptions kQuiet{.quiet = true};

// Per-process scratch folder, removed when the test program exits.
const std::filesystem::path& temp_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir()
        : path(std::filesystem::temp_directory_path() /
               ("pith_gen_test_" + std::to_string(::getpid()))) {
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

std::string temp_path(const std::string& name) {
  return (temp_dir() / name).string();
}

ModelGenOptions tiny(DType dtype, const std::string& format, const std::string& out,
                     uint64_t seed = 7) {
  ModelGenOptions o;
  o.preset = "tiny";
  o.dtype = dtype;
  o.vocab_path = kVocab;
  o.format = format;
  o.seed = seed;
  o.output = out;
  o.quiet = true;
  return o;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_same_matrix(const WeightMatrix& a, const WeightMatrix& b, const std::string& what) {
  ASSERT_EQ(a.dtype, b.dtype) << what;
  ASSERT_EQ(a.rows, b.rows) << what;
  ASSERT_EQ(a.cols, b.cols) << what;
  if (a.rows == 0) {  // a matrix the family does not have (MoE layers have no dense FFN)
    EXPECT_EQ(a.data == nullptr, b.data == nullptr) << what;
    return;
  }
  EXPECT_EQ(std::memcmp(a.data, b.data, a.rows * a.row_bytes()), 0) << what;
}

void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  EXPECT_EQ(a.config.n_layers, b.config.n_layers);
  EXPECT_EQ(a.config.vocab_size, b.config.vocab_size);
  EXPECT_EQ(a.config.rope_freq_factors, b.config.rope_freq_factors);
  EXPECT_EQ(a.config.rope_theta, b.config.rope_theta);
  EXPECT_EQ(a.config.rms_eps, b.config.rms_eps);
  EXPECT_EQ(a.config.tied_output, b.config.tied_output);
  expect_same_matrix(a.token_embd, b.token_embd, "token_embd");
  expect_same_matrix(a.output, b.output, "output");
  EXPECT_EQ(a.output_norm, b.output_norm);
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    expect_same_matrix(x.wq, y.wq, "wq");
    expect_same_matrix(x.wk, y.wk, "wk");
    expect_same_matrix(x.wv, y.wv, "wv");
    expect_same_matrix(x.wo, y.wo, "wo");
    expect_same_matrix(x.w_gate, y.w_gate, "w_gate");
    expect_same_matrix(x.w_up, y.w_up, "w_up");
    expect_same_matrix(x.w_down, y.w_down, "w_down");
    EXPECT_EQ(x.attn_norm, y.attn_norm);
    EXPECT_EQ(x.ffn_norm, y.ffn_norm);
    for (auto [u, v, what] : {std::tuple{&x.bq, &y.bq, "bq"},
                              {&x.bk, &y.bk, "bk"},
                              {&x.bv, &y.bv, "bv"},
                              {&x.q_norm, &y.q_norm, "q_norm"},
                              {&x.k_norm, &y.k_norm, "k_norm"},
                              {&x.post_attn_norm, &y.post_attn_norm, "post_attn_norm"},
                              {&x.post_ffn_norm, &y.post_ffn_norm, "post_ffn_norm"},
                              {&x.ssm_conv_t, &y.ssm_conv_t, "ssm_conv"},
                              {&x.ssm_dt_bias, &y.ssm_dt_bias, "ssm_dt_bias"},
                              {&x.ssm_a, &y.ssm_a, "ssm_a"},
                              {&x.ssm_norm, &y.ssm_norm, "ssm_norm"}})
      EXPECT_EQ(*u, *v) << what << " layer " << i;
    for (auto [u, v, what] : {std::tuple{&x.ssm_qkv, &y.ssm_qkv, "ssm_qkv"},
                              {&x.ssm_gate, &y.ssm_gate, "ssm_gate"},
                              {&x.ssm_beta, &y.ssm_beta, "ssm_beta"},
                              {&x.ssm_alpha, &y.ssm_alpha, "ssm_alpha"},
                              {&x.ssm_out, &y.ssm_out, "ssm_out"}})
      expect_same_matrix(*u, *v, what);
    EXPECT_EQ(x.sh_gate_inp, y.sh_gate_inp);
    for (auto [u, v, what] : {std::tuple{&x.router, &y.router, "router"},
                              {&x.sh_gate, &y.sh_gate, "sh_gate"},
                              {&x.sh_up, &y.sh_up, "sh_up"},
                              {&x.sh_down, &y.sh_down, "sh_down"}})
      if (u->data || v->data) expect_same_matrix(*u, *v, what);
    ASSERT_EQ(x.exp_gate.size(), y.exp_gate.size());
    for (size_t e = 0; e < x.exp_gate.size(); ++e) {
      expect_same_matrix(x.exp_gate[e], y.exp_gate[e], "exp_gate");
      expect_same_matrix(x.exp_up[e], y.exp_up[e], "exp_up");
      expect_same_matrix(x.exp_down[e], y.exp_down[e], "exp_down");
    }
  }
}

// Every option of the family config, compared field by field.
void expect_same_family_options(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.ffn_activation, b.ffn_activation);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.post_norms, b.post_norms);
  EXPECT_EQ(a.embed_scale, b.embed_scale);
  EXPECT_EQ(a.attn_scale, b.attn_scale);
  EXPECT_EQ(a.attn_softcap, b.attn_softcap);
  EXPECT_EQ(a.final_softcap, b.final_softcap);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.sliding_layers, b.sliding_layers);
  EXPECT_EQ(a.rope_theta_local, b.rope_theta_local);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.attn_output_gate, b.attn_output_gate);
  EXPECT_EQ(a.recurrent_layers, b.recurrent_layers);
  EXPECT_EQ(a.delta_net.k_heads, b.delta_net.k_heads);
  EXPECT_EQ(a.delta_net.v_heads, b.delta_net.v_heads);
  EXPECT_EQ(a.delta_net.k_dim, b.delta_net.k_dim);
  EXPECT_EQ(a.delta_net.v_dim, b.delta_net.v_dim);
  EXPECT_EQ(a.delta_net.conv_kernel, b.delta_net.conv_kernel);
  EXPECT_EQ(a.global_head_dim, b.global_head_dim);
  EXPECT_EQ(a.global_kv_heads, b.global_kv_heads);
  EXPECT_EQ(a.global_v_from_k, b.global_v_from_k);
  EXPECT_EQ(a.rope_dim_local, b.rope_dim_local);
  EXPECT_EQ(a.v_norm, b.v_norm);
  EXPECT_EQ(a.layer_scale, b.layer_scale);
  EXPECT_EQ(a.n_kv_shared_layers, b.n_kv_shared_layers);
  EXPECT_EQ(a.double_wide_shared_ffn, b.double_wide_shared_ffn);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_freq_factors, b.rope_freq_factors);
  EXPECT_EQ(a.tied_output, b.tied_output);
}
}  // namespace

TEST(ModelGen, PresetsHaveLlama3Shapes) {
  ModelPreset p1 = model_preset("llama3.2-1b");
  EXPECT_EQ(p1.config.n_layers, 16u);
  EXPECT_EQ(p1.config.d_model, 2048u);
  EXPECT_EQ(p1.config.n_heads, 32u);
  EXPECT_EQ(p1.config.n_kv_heads, 8u);
  EXPECT_EQ(p1.config.head_dim, 64u);
  EXPECT_EQ(p1.config.d_ff, 8192u);
  EXPECT_TRUE(p1.config.tied_output);
  EXPECT_FLOAT_EQ(p1.config.rope_theta, 500000.0f);
  ASSERT_EQ(p1.config.rope_freq_factors.size(), 32u);
  EXPECT_FLOAT_EQ(p1.config.rope_freq_factors.back(), 32.0f);
  ModelPreset p3 = model_preset("llama3.2-3b");
  EXPECT_EQ(p3.config.n_layers, 28u);
  EXPECT_EQ(p3.config.d_model, 3072u);
  EXPECT_EQ(p3.config.n_heads, 24u);
  EXPECT_EQ(p3.config.head_dim, 128u);
  EXPECT_TRUE(p3.config.tied_output);
  ModelPreset p8 = model_preset("llama3.1-8b");
  EXPECT_EQ(p8.config.n_layers, 32u);
  EXPECT_EQ(p8.config.d_ff, 14336u);
  EXPECT_FALSE(p8.config.tied_output);
  EXPECT_THROW(model_preset("llama3.3-70b"), Error);
}

TEST(ModelGen, ZigguratSamplesAreStandardNormal) {
  NormalZiggurat z;
  Xoshiro256 rng(42);
  const int n = 400000;
  double s1 = 0, s2 = 0, s4 = 0;
  int beyond2 = 0, beyond3 = 0;
  for (int i = 0; i < n; ++i) {
    double x = z(rng);
    s1 += x, s2 += x * x, s4 += x * x * x * x;
    beyond2 += std::fabs(x) > 2;
    beyond3 += std::fabs(x) > 3.5;  // the tail path (r = 3.44)
  }
  EXPECT_NEAR(s1 / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 3.0, 0.06);
  EXPECT_NEAR(double(beyond2) / n, 0.0455, 0.002);
  EXPECT_NEAR(double(beyond3) / n, 4.65e-4, 1.2e-4);
  Xoshiro256 a(5), b(5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(z(a), z(b));
}

TEST(ModelGen, GgufAndHfOfOneSeedLoadToIdenticalWeights) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const std::string name(dtype_info(dt).name);
    std::string g = temp_path(name + ".gguf"), h = temp_path(name + "_hf");
    ThreadPool pool(2);
    ModelGenResult rg = generate_model(tiny(dt, "gguf", g), pool);
    ModelGenResult rh = generate_model(tiny(dt, "hf", h), pool);
    EXPECT_EQ(rg.n_params, rh.n_params);
    EXPECT_EQ(rh.files.size(),
              4u);  // model.safetensors, config.json, tokenizer.json, tokenizer_config.json
    EXPECT_TRUE(fs::exists(fs::path(h) / "tokenizer.json"));
    auto wg = load_model(g, kQuiet);
    auto wh = load_model(h, kQuiet);
    EXPECT_EQ(wg->format, "gguf");
    EXPECT_EQ(wh->format, "hf");
    EXPECT_EQ(wg->config.d_model, 64u);
    EXPECT_EQ(wg->config.n_kv_heads, 2u);
    EXPECT_EQ(wg->config.vocab_size, 1000u);
    EXPECT_EQ(dtype_summary(*wg), name);
    EXPECT_EQ(wg->n_params(), rg.n_params);
    expect_same_weights(*wg, *wh);
    // The HF file itself is in split-half order: its q_proj row 1 is pith row 2.
    SafetensorsFile st((fs::path(h) / "model.safetensors").string());
    const auto* q = st.find("model.layers.0.self_attn.q_proj.weight");
    ASSERT_NE(q, nullptr);
    size_t rb = wg->layers[0].wq.row_bytes();
    EXPECT_EQ(std::memcmp(q->data + rb, wg->layers[0].wq.row(2), rb), 0);
    EXPECT_NE(std::memcmp(q->data + rb, wg->layers[0].wq.row(1), rb), 0);
  }
}

// gpt-oss (GGUF only): the options and tensors of the family as its files carry them, and its
// MXFP4 file type (experts MXFP4, every other matrix Q8_0, vectors and bias tables f32).
TEST(ModelGen, GptOssGgufHasItsOptionsAndMxfp4Experts) {
  ThreadPool pool(2);
  for (const char* dtype : {"f32", "mxfp4_moe"}) {
    SCOPED_TRACE(dtype);
    const std::string path = temp_path(std::string("gpt-oss-") + dtype + ".gguf");
    ModelGenOptions o = tiny(DType::F32, "gguf", path);
    o.arch = "gpt-oss";
    if (std::string(dtype) == "mxfp4_moe") o.mix = QuantMix::MXFP4_MOE;
    generate_model(o, pool);
    auto w = load_model(path, kQuiet);
    const ModelConfig& c = w->config;
    EXPECT_EQ(c.architecture, "gpt-oss");
    EXPECT_TRUE(c.qkv_bias && c.attn_out_bias && c.attn_sinks && c.moe_bias);
    EXPECT_EQ(c.ffn_activation, FfnActivation::SwigluOai);
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalf);
    EXPECT_EQ(c.sliding_window, 4u);
    EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 0}));
    EXPECT_EQ(c.yarn.factor, 32.0f);
    EXPECT_EQ(c.yarn.original_context, 4096u);
    EXPECT_EQ(c.n_experts, 8u);
    EXPECT_EQ(c.n_experts_used, 2u);
    EXPECT_EQ(c.d_ff_expert, 32u);
    EXPECT_FALSE(c.tied_output);
    const LayerWeights& l = w->layers[1];
    EXPECT_EQ(l.sinks.size(), size_t{c.n_heads});
    EXPECT_EQ(l.bo.size(), size_t{c.d_model});
    EXPECT_EQ(l.router_bias.size(), 8u);
    EXPECT_EQ(l.exp_gate_bias.size(), 8u * 32);
    EXPECT_EQ(l.exp_down_bias.size(), 8u * c.d_model);
    const bool fp4 = std::string(dtype) == "mxfp4_moe";
    EXPECT_EQ(l.exp_up[3].dtype, fp4 ? DType::MXFP4 : DType::F32);
    EXPECT_EQ(l.exp_down[7].dtype, fp4 ? DType::MXFP4 : DType::F32);
    EXPECT_EQ(l.wq.dtype, fp4 ? DType::Q8_0 : DType::F32);
    EXPECT_EQ(w->output.dtype, fp4 ? DType::Q8_0 : DType::F32);
    EXPECT_EQ(w->token_embd.dtype, fp4 ? DType::Q8_0 : DType::F32);
    GGUFFile f(path);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.bias")->dtype, DType::F32);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.bias")->dims, (std::vector<uint64_t>{32, 8}));
    EXPECT_EQ(f.find_tensor("blk.0.attn_sinks.weight")->dims, (std::vector<uint64_t>{c.n_heads}));
    EXPECT_NE(f.find_tensor("blk.0.post_attention_norm.weight"), nullptr);
  }
  // A base of the sliding layers' own (a key llama.cpp reads) is refused by name unless it is
  // the global one.
  const std::string src_path = temp_path("gpt-oss-f32.gguf");
  GGUFFile src(src_path);
  const double base = src.get_float_or("gpt-oss.rope.freq_base", 0);
  ASSERT_GT(base, 0);
  for (double swa : {base, base / 2}) {
    const std::string path = temp_path("gpt-oss-swa.gguf");
    {
      GGUFWriter w(path);
      for (const auto& [k, v] : src.metadata()) w.set(k, v);
      w.set_f32("gpt-oss.rope.freq_base_swa", static_cast<float>(swa));
      for (const auto& t : src.tensors()) w.add_tensor(t.name, t.dims, t.dtype);
      for (const auto& t : src.tensors()) w.write(t.data, t.n_bytes);
      w.finish();
    }
    if (swa == base) {
      EXPECT_NO_THROW(load_model(path, kQuiet));
    } else {
      try {
        load_model(path, kQuiet);
        ADD_FAILURE() << "a different sliding base loaded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rope.freq_base_swa"), std::string::npos) << e.what();
      }
    }
  }
}

// Every family: the GGUF and HF outputs of one seed load to the same options and weights
// (gemma's HF norms hold w - 1, phi3's projections are fused, qwen/gemma rotate halves).
TEST(ModelGen, EveryFamilyLoadsIdenticallyFromBothFormats) {
  ThreadPool pool(2);
  for (const Architecture* arch : architectures()) {
    const std::string name(arch->name);
    SCOPED_TRACE(name);
    std::string g = temp_path(name + ".gguf"), h = temp_path(name + "_hf");
    ModelGenOptions og = tiny(DType::F32, "gguf", g), oh = tiny(DType::F32, "hf", h);
    og.arch = oh.arch = name;
    generate_model(og, pool);
    if (!arch->hf_unsupported
             .empty()) {  // GGUF-only (gpt-oss): refused by name, GGUF checked below
      try {
        generate_model(oh, pool);
        ADD_FAILURE() << "HF output of a GGUF-only family was written";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--format gguf"), std::string::npos) << e.what();
      }
      continue;
    }
    generate_model(oh, pool);
    auto wg = load_model(g, kQuiet);
    auto wh = load_model(h, kQuiet);
    const ModelConfig& c = wg->config;
    EXPECT_EQ(c.architecture, name == "mistral" ? "llama" : name);  // Mistral GGUFs say llama
    ModelConfig hc = wh->config;
    if (name == "mistral") hc.architecture = "llama";
    expect_same_family_options(c, hc);
    expect_same_weights(*wg, *wh);
    // What each family is made of.
    EXPECT_EQ(c.qkv_bias, name == "qwen2" || name == "qwen2moe");
    EXPECT_EQ(c.qk_norm, name == "qwen3" || name == "qwen3moe" || name == "gemma3" ||
                             name == "gemma4" || name.starts_with("qwen35"));
    EXPECT_EQ(c.post_norms, name.starts_with("gemma"));
    EXPECT_EQ(c.rope_style == RopeStyle::SplitHalf, name != "llama" && name != "mistral");
    EXPECT_EQ(c.sliding_window > 0, name != "llama" && !name.starts_with("qwen"));
    if (name == "gemma2") {
      EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 0}));
      EXPECT_GT(c.attn_softcap, 0);
      EXPECT_GT(c.final_softcap, 0);
      EXPECT_EQ(c.embed_scale, 8.0f);
    }
    if (name == "gemma3") {
      EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
      EXPECT_EQ(c.rope_theta_local, 10000.0f);
      EXPECT_EQ(c.rope_theta, 1e6f);
      // HF stores the norm as w - 1; both loads hold w, close to 1.
      for (float v : wg->layers[0].q_norm) EXPECT_NEAR(v, 1.0f, 0.15f);
    }
    if (name == "gemma4") {  // a global layer with larger heads, one KV head, V = K, proportional
      EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
      EXPECT_EQ(c.global_head_dim, 2 * c.head_dim);
      EXPECT_EQ(c.kv_heads_of(5), 1u);
      EXPECT_EQ(c.kv_heads_of(0), c.n_kv_heads);
      EXPECT_TRUE(c.global_v_from_k && c.v_norm && c.layer_scale);
      EXPECT_EQ(c.attn_scale, 1.0f);
      EXPECT_EQ(wg->layers[5].wv.data, nullptr);
      EXPECT_EQ(wg->layers[5].wk.rows, size_t{c.global_head_dim});
      ASSERT_EQ(c.rope_freq_factors.size(), size_t{c.global_head_dim / 2});
      EXPECT_EQ(c.rope_freq_factors[c.global_head_dim / 8 - 1], 1.0f);  // a quarter turns
      EXPECT_EQ(c.rope_freq_factors[c.global_head_dim / 8], 1e30f);
      EXPECT_NEAR(wg->layers[2].layer_scale, 1.0f, 0.15f);
    }
    if (name.starts_with(
            "qwen35")) {  // hybrid: 3 DeltaNet layers, then gated attention, a half rotates
      EXPECT_EQ(c.recurrent_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
      EXPECT_TRUE(c.attn_output_gate);
      EXPECT_EQ(c.rope_dim, c.head_dim / 2);
      EXPECT_EQ(c.delta_net.v_heads, 2 * c.delta_net.k_heads);  // HF reorders its value heads
      EXPECT_EQ(wg->layers[3].wq.rows, 2 * size_t{c.q_dim()});
      for (float a : wg->layers[0].ssm_a) EXPECT_TRUE(a <= -1.0f && a >= -16.0f);
    } else {
      EXPECT_TRUE(c.recurrent_layers.empty());
    }
    if (c.n_experts > 0) {  // MoE: 8 experts, 2 per token; a decode reads only those
      EXPECT_EQ(c.n_experts, 8u);
      EXPECT_EQ(c.n_experts_used, 2u);
      EXPECT_EQ(c.moe_norm_top_k, name == "qwen3moe" || name == "qwen35moe");
      EXPECT_EQ(c.d_ff_shared_expert > 0, name == "qwen2moe" || name == "qwen35moe");
      EXPECT_EQ(wg->layers[1].exp_down.size(), 8u);
      const size_t expert_bytes = 3 * size_t{c.d_ff_expert} * c.d_model * 4 * c.n_layers;
      EXPECT_EQ(wg->weight_bytes() - wg->active_weight_bytes(), 6 * expert_bytes);
    } else {
      EXPECT_EQ(wg->active_weight_bytes(), wg->weight_bytes());
    }
    if (name == "phi3") {  // fused projections become row slices of one matrix
      EXPECT_EQ(wg->layers[0].wk.row(0), wg->layers[0].wq.row(c.q_dim()));
      EXPECT_EQ(wg->layers[0].w_up.row(0), wg->layers[0].w_gate.row(c.d_ff));
    }
  }
}

TEST(ModelGen, NamedPresetsKeepTheirFamily) {
  EXPECT_EQ(model_preset("qwen3-0.6b").config.architecture, "qwen3");
  EXPECT_EQ(model_preset("qwen3-0.6b").config.head_dim, 128u);
  EXPECT_EQ(model_preset("gemma3-1b").config.sliding_window, 512u);
  EXPECT_EQ(model_preset("gemma2-2b").config.final_softcap, 30.0f);
  EXPECT_EQ(model_preset("tiny", "qwen2").config.architecture, "qwen2");
  EXPECT_THROW(model_preset("qwen3-0.6b", "gemma2"), Error);
  const ModelConfig moe = model_preset("qwen3-30b-a3b").config;
  EXPECT_EQ(moe.n_experts, 128u);
  EXPECT_EQ(moe.n_experts_used, 8u);
  EXPECT_TRUE(moe.moe_norm_top_k);
  EXPECT_THROW(model_preset("tiny", "gpt2"), Error);
}

// --option KEY=VALUE changes a preset's config.json options: gemma4's E2B-style layers
// (per-layer token embeddings, KV-sharing layers reading the last earlier layer of their kind,
// double-wide FFNs there), the shape's sizes; malformed, inconsistent or unread options are clear
// errors.
TEST(ModelGen, OptionsOverrideThePreset) {
  const std::vector<std::string> e2b = {
      "hidden_size_per_layer_input=8", "num_kv_shared_layers=2", "use_double_wide_mlp=true",
      "attention_k_eq_v=false",
      R"(layer_types=["sliding_attention","sliding_attention","sliding_attention","full_attention","sliding_attention","full_attention"])"};
  const ModelConfig c = model_preset("tiny", "gemma4", e2b).config;
  EXPECT_EQ(c.d_per_layer_input, 8u);
  EXPECT_EQ(c.n_kv_shared_layers, 2u);
  EXPECT_EQ(c.n_kv_layers(), 4u);
  EXPECT_FALSE(c.layer_has_kv(4));
  EXPECT_EQ(c.kv_source_layer(4), 2u);  // sliding: the last earlier sliding layer
  EXPECT_EQ(c.kv_source_layer(5), 3u);  // global
  EXPECT_EQ(c.kv_layer(5), 3u);
  EXPECT_EQ(c.d_ff_of(4), 2 * c.d_ff);
  EXPECT_EQ(c.d_ff_of(3), c.d_ff);
  EXPECT_FALSE(c.global_v_from_k);
  EXPECT_EQ(c.global_kv_heads, 0u);  // HF: only with attention_k_eq_v
  EXPECT_EQ(model_preset("tiny", "gemma4", {"num_hidden_layers=12"}).config.n_layers, 12u);
  // 26B-A4B: experts beside the dense FFN, top-k renormalised.
  const ModelConfig m = model_preset("tiny", "gemma4",
                                     {"enable_moe_block=true", "num_experts=8", "top_k_experts=2",
                                      "moe_intermediate_size=32"})
                            .config;
  EXPECT_TRUE(m.moe_beside_dense && m.dense_ffn() && m.moe_norm_top_k);
  EXPECT_EQ(m.n_experts, 8u);
  EXPECT_EQ(m.d_ff_expert, 32u);
  EXPECT_THROW(model_preset("tiny", "gemma4", {"enable_moe_block=true", "num_experts=8"}), Error);
  EXPECT_THROW(model_preset("tiny", "gemma4", {"no_value"}), Error);
  EXPECT_THROW(model_preset("tiny", "gemma4", {"num_hidden_layers=0"}), Error);
  // Sharing from layer 4 on, with no global layer before it to read.
  EXPECT_THROW(model_preset("tiny", "gemma4", {"num_kv_shared_layers=2"}), Error);
  EXPECT_THROW(model_preset("tiny", "gemma4", {"num_kv_shared_layers=6"}), Error);
  // The shape's sizes, and what is derived from them (head_dim, Llama 3's rope factors).
  const ModelConfig s = model_preset("tiny256", "llama",
                                     {"num_key_value_heads=1", "intermediate_size=512",
                                      "hidden_size=512", "num_attention_heads=8"})
                            .config;
  EXPECT_EQ(s.n_kv_heads, 1u);
  EXPECT_EQ(s.n_heads, 8u);
  EXPECT_EQ(s.d_model, 512u);
  EXPECT_EQ(s.d_ff, 512u);
  EXPECT_EQ(s.head_dim, 64u);
  EXPECT_EQ(s.rope_freq_factors.size(), 32u);
  EXPECT_EQ(model_preset("tiny", "llama", {"head_dim=32"}).config.head_dim, 32u);
  EXPECT_THROW(model_preset("tiny", "llama", {"num_key_value_heads=3"}), Error);  // 4 % 3
  EXPECT_THROW(model_preset("tiny", "llama", {"hidden_size=70"}), Error);         // 70 % 4
  EXPECT_THROW(model_preset("tiny", "llama", {"num_attention_heads=0"}), Error);
  // An option nothing reads (a misspelling, another family's key) is refused by name.
  try {
    model_preset("tiny", "llama", {"num_key_vaue_heads=1"});
    ADD_FAILURE() << "a misspelt option was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_vaue_heads"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model_preset("tiny", "llama", {"num_kv_shared_layers=2"}), Error);
  EXPECT_NO_THROW(model_preset("tiny", "qwen3moe", {"num_experts_per_tok=4"}));
}

// An embedding model's pooling travels in both formats as llama.cpp and sentence-transformers
// write it (GGUF <arch>.pooling_type, an HF folder's 1_Pooling/config.json) and loads back.
TEST(ModelGen, EmbeddingPoolingRoundTripsInBothFormats) {
  ThreadPool pool(2);
  for (const char* pooling : {"last", "mean", "cls"}) {
    for (const char* format : {"gguf", "hf"}) {
      const std::string out = temp_path(std::string("pool-") + pooling + "." + format);
      ModelGenOptions o = tiny(DType::F32, format, out);
      o.options = {std::string("pooling=") + pooling};
      generate_model(o, pool);
      EXPECT_EQ(load_model(out, kQuiet)->config.pooling, pooling) << format;
    }
  }
  const std::string plain = temp_path("pool-none.gguf");
  generate_model(tiny(DType::F32, "gguf", plain), pool);
  EXPECT_EQ(load_model(plain, kQuiet)->config.pooling, "");  // a generative model says nothing
  EXPECT_THROW(model_preset("tiny", "llama", {"pooling=max"}), Error);
}

TEST(ModelGen, WeightsHaveTheRequestedDistribution) {
  std::string g = temp_path("dist.gguf");
  ThreadPool pool(2);
  generate_model(tiny(DType::F32, "gguf", g, 3), pool);
  auto w = load_model(g, kQuiet);
  const WeightMatrix& m = w->layers[1].w_gate;
  const float* x = static_cast<const float*>(m.data);
  double s2 = 0;
  for (size_t i = 0; i < m.rows * m.cols; ++i) s2 += double(x[i]) * x[i];
  EXPECT_NEAR(std::sqrt(s2 / double(m.rows * m.cols)), 0.02, 0.001);
  for (float v : w->layers[0].attn_norm) EXPECT_NEAR(v, 1.0f, 0.15f);
  // GGUF copies the vocabulary's tokenizer metadata.
  GGUFFile f(g), v(kVocab);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"),
            v.get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores"), v.get_f32_array("tokenizer.ggml.scores"));
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
}

TEST(ModelGen, QuantisedGgufMatchesF32WithinHalfAStep) {
  std::string f = temp_path("ref.gguf");
  ThreadPool pool(2);
  generate_model(tiny(DType::F32, "gguf", f), pool);
  auto ref = load_model(f, kQuiet);
  for (DType dt : {DType::Q8_0, DType::Q4_0}) {
    std::string q = temp_path(std::string(dtype_info(dt).name) + ".gguf");
    generate_model(tiny(dt, "gguf", q), pool);
    auto w = load_model(q, kQuiet);
    EXPECT_EQ(dtype_summary(*w), dtype_info(dt).name);
    const WeightMatrix &a = w->layers[0].wk, &b = ref->layers[0].wk;
    std::vector<float> x(a.cols), y(b.cols);
    for (size_t r = 0; r < a.rows; ++r) {
      dequantize_row(a.dtype, a.row(r), x.data(), a.cols);
      dequantize_row(b.dtype, b.row(r), y.data(), b.cols);
      for (size_t blk = 0; blk < a.cols / 32; ++blk) {
        float amax = 0;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(y[blk * 32 + j]));
        // Q8_0 rounds to the nearest step; Q4_0's range [-8, 7] clamps one end by a full step.
        float tol = dt == DType::Q8_0 ? 0.5f * amax / 127 : amax / 8;
        for (size_t j = 0; j < 32; ++j)
          ASSERT_LE(std::fabs(x[blk * 32 + j] - y[blk * 32 + j]), tol + 2e-3f * amax) << r;
      }
    }
    EXPECT_EQ(w->layers[0].ffn_norm, ref->layers[0].ffn_norm);  // norms stay f32
  }
}

TEST(ModelGen, OutputIsDeterministicAcrossThreadCounts) {
  std::string a = temp_path("t1.gguf"), b = temp_path("t3.gguf");
  ThreadPool p1(1), p3(3);
  generate_model(tiny(DType::BF16, "gguf", a, 11), p1);
  generate_model(tiny(DType::BF16, "gguf", b, 11), p3);
  EXPECT_EQ(read_all(a), read_all(b));
  std::string c = temp_path("seed12.gguf");
  generate_model(tiny(DType::BF16, "gguf", c, 12), p3);
  EXPECT_NE(read_all(a), read_all(c));
}

TEST(ModelGen, ShardedHfFolderLoadsLikeASingleFile) {
  std::string one = temp_path("one_hf"), many = temp_path("many_hf");
  ThreadPool pool(2);
  generate_model(tiny(DType::F16, "hf", one), pool);
  ModelGenOptions o = tiny(DType::F16, "hf", many);
  o.shard_bytes = 40000;
  ModelGenResult r = generate_model(o, pool);
  EXPECT_TRUE(fs::exists(fs::path(many) / "model.safetensors.index.json"));
  size_t shards = 0;
  for (const auto& f : r.files) shards += fs::path(f).filename().string().starts_with("model-0000");
  EXPECT_GT(shards, 2u);
  EXPECT_TRUE(
      fs::exists(fs::path(many) / fmt::format("model-00001-of-{:05d}.safetensors", shards)));
  EXPECT_FALSE(fs::exists(fs::path(many) / "model.safetensors"));
  expect_same_weights(*load_model(one, kQuiet), *load_model(many, kQuiet));
  // Regenerating unsharded into the same folder removes the old shards and index.
  generate_model(tiny(DType::F16, "hf", many), pool);
  EXPECT_FALSE(fs::exists(fs::path(many) / "model.safetensors.index.json"));
  EXPECT_FALSE(
      fs::exists(fs::path(many) / fmt::format("model-00001-of-{:05d}.safetensors", shards)));
  expect_same_weights(*load_model(one, kQuiet), *load_model(many, kQuiet));
}

TEST(ModelGen, BadRequestsAreClearErrors) {
  ThreadPool pool(1);
  auto expect_error = [&](ModelGenOptions o, const std::string& part) {
    try {
      generate_model(o, pool);
      ADD_FAILURE() << "expected an error: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(tiny(DType::Q8_0, "hf", temp_path("q8_hf")),
               "cannot be written to a Hugging Face folder");
  auto o = tiny(DType::F32, "gguf", temp_path("x.gguf"));
  o.preset = "huge";
  expect_error(o, "unknown model preset 'huge'");
  o = tiny(DType::F32, "onnx", temp_path("x.onnx"));
  expect_error(o, "unknown model format 'onnx'");
  o = tiny(DType::F32, "gguf", temp_path("x.gguf"));
  o.vocab_path = "/nonexistent/vocab.gguf";
  expect_error(o, "/nonexistent/vocab.gguf");
}

}  // namespace pith
