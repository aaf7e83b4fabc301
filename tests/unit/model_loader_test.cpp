// load_model on the oracle's tiny GGUFs (config, shapes, dtypes, rope factors, tied/untied)
// and on malformed inputs (every failure is a pith::Error naming the file).
#include "engine/model_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "engine/gguf_loader.h"
#include "engine/hf_loader.h"
#include "engine/kernels/matmul.h"

namespace pith {

namespace {
const std::string kModels = std::string(PITH_TEST_DATA) + "/models/";
const LoadOptions kQuiet{.quiet = true};

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_temp(const std::vector<char>& bytes, const std::string& name) {
  auto path = std::filesystem::temp_directory_path() / ("pith_loader_test_" + name);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

// Expects load_model(path) to throw a pith::Error whose message contains every `parts`.
void expect_load_error(const std::string& path, std::vector<std::string> parts) {
  try {
    load_model(path, kQuiet);
    ADD_FAILURE() << "expected an error loading " << path;
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
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
    EXPECT_EQ(dtype_summary(*q), std::string(name).find("bf16") != std::string::npos ? "bf16" : "q8_0");
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

}  // namespace pith
