// K-quant models end to end: `pith model gen`'s llama.cpp mixes give each tensor the type of
// llama.cpp's rules, load, and run the Llama forward with logits close to the same random
// model in f32 (prefill through the GEMM path and short prompts through the integer kernels),
// the same on the scalar kernels as on the SIMD ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/kernels/cpu_features.h"
#include "engine_test_util.h"
#include "formats/gguf.h"
#include "model_gen/model_gen.h"

namespace pith {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("pith_kquant_model_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string generate(const TempDir& dir, const std::string& preset, const std::string& dtype) {
  ModelGenOptions g;
  g.preset = preset;
  g.vocab_path = test::model_path("tiny-f32");  // 1000 tokens
  g.seed = 3;
  g.quiet = true;
  if (auto mix = quant_mix_from_name(dtype))
    g.mix = *mix;
  else
    g.dtype = *dtype_from_name(dtype);
  g.output = (dir.path / (preset + "-" + dtype + ".gguf")).string();
  ThreadPool pool(2);
  generate_model(g, pool);
  return g.output;
}

std::shared_ptr<const ModelWeights> load(const std::string& path) {
  LoadOptions lo;
  lo.quiet = true;
  return load_model(path, lo);
}

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, 999);
  std::vector<int32_t> t{1};
  while (t.size() < n) t.push_back(d(rng));
  return t;
}

// RMS of (a - b) over RMS of b, over every position's logits.
double rel_rms(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = 0; j < b[i].size(); ++j) {
      EXPECT_TRUE(std::isfinite(a[i][j])) << "position " << i << " token " << j;
      e += double(a[i][j] - b[i][j]) * (a[i][j] - b[i][j]);
      s += double(b[i][j]) * b[i][j];
    }
  return std::sqrt(e / s);
}

DType tensor_type(const GGUFFile& f, const std::string& name) {
  const auto* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? t->dtype : DType::F32;
}

}  // namespace

// Every mix on a 16-layer model with 4 query heads per KV head (the layer and GQA rules all
// apply) gives each tensor the type llama.cpp's own quantiser gave it on the same f32 model
// (tests/data/kquant/llama-cpp-mix-types.json, tools/make_mix_oracle.py).
TEST(KQuantModel, MixesMatchLlamaCppQuantiser) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/kquant/llama-cpp-mix-types.json");
  ASSERT_TRUE(in) << "missing llama-cpp-mix-types.json";
  const nlohmann::json ref = nlohmann::json::parse(in);
  TempDir dir;
  size_t compared = 0;
  for (const auto& [mix, types] : ref["mixes"].items()) {
    ModelGenOptions g;
    g.preset = ref["preset"].get<std::string>();
    g.options = ref["options"].get<std::vector<std::string>>();
    g.vocab_path = test::model_path("tiny-f32");
    g.quiet = true;
    g.mix = *quant_mix_from_name(mix);
    g.output = (dir.path / (mix + ".gguf")).string();
    ThreadPool pool(2);
    generate_model(g, pool);
    GGUFFile f(g.output);
    size_t quantised = 0;
    for (const GGUFTensorInfo& t : f.tensors()) {
      if (t.dtype == DType::F32) continue;
      ++quantised;
      ASSERT_TRUE(types.contains(t.name)) << mix << ": " << t.name << " is quantised";
      EXPECT_EQ(dtype_info(t.dtype).name, types[t.name].get<std::string>()) << mix << " " << t.name;
      ++compared;
    }
    EXPECT_EQ(quantised, types.size()) << mix;
  }
  EXPECT_EQ(compared, 10u * 113);  // 10 mixes x (16 layers x 7 matrices + the embedding)
}

TEST(KQuantModel, MixesGiveLlamaCppTensorTypes) {
  TempDir dir;
  {
    GGUFFile f(generate(dir, "tiny256", "q4_k_m"));
    EXPECT_EQ(f.get_uint("general.file_type"), 15u);
    // 2 layers: use_more_bits holds for layer 1 (>= 7 * 2 / 8) only; tied output -> token_embd.
    EXPECT_EQ(tensor_type(f, "token_embd.weight"), DType::Q6_K);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_v.weight"), DType::Q4_K);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_v.weight"), DType::Q6_K);
    EXPECT_EQ(tensor_type(f, "blk.0.ffn_down.weight"), DType::Q4_K);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_down.weight"), DType::Q6_K);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_q.weight"), DType::Q4_K);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_up.weight"), DType::Q4_K);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_norm.weight"), DType::F32);
  }
  {
    GGUFFile f(generate(dir, "tiny256", "q4_k_s"));
    EXPECT_EQ(f.get_uint("general.file_type"), 14u);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_v.weight"), DType::Q5_K);    // layers < 4
    EXPECT_EQ(tensor_type(f, "blk.0.ffn_down.weight"), DType::Q4_K);  // layers < 2 / 8: none
    EXPECT_EQ(tensor_type(f, "token_embd.weight"), DType::Q6_K);
  }
  {
    GGUFFile f(generate(dir, "tiny256", "q5_k_m"));
    EXPECT_EQ(tensor_type(f, "blk.0.attn_k.weight"), DType::Q5_K);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_down.weight"), DType::Q6_K);
  }
  {
    GGUFFile f(generate(dir, "tiny256", "q6_k"));
    EXPECT_EQ(f.get_uint("general.file_type"), 18u);
    for (const auto& t : f.tensors())
      if (t.dims.size() == 2) {
        EXPECT_EQ(t.dtype, DType::Q6_K) << t.name;
      }
  }
  {
    // Rows of 64 are not whole K-quant blocks: llama.cpp's fallbacks Q4_K -> Q5_0,
    // Q6_K -> Q8_0 (and Q5_K -> Q5_1 in q5_k_m).
    GGUFFile f(generate(dir, "tiny", "q4_k_m"));
    EXPECT_EQ(tensor_type(f, "token_embd.weight"), DType::Q8_0);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_v.weight"), DType::Q5_0);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_v.weight"), DType::Q8_0);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_down.weight"), DType::Q8_0);
    EXPECT_EQ(tensor_type(f, "blk.0.ffn_up.weight"), DType::Q5_0);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_q.weight"), DType::Q5_0);
    GGUFFile g(generate(dir, "tiny", "q5_k_m"));
    EXPECT_EQ(tensor_type(g, "blk.0.attn_k.weight"), DType::Q5_1);
    EXPECT_EQ(tensor_type(g, "blk.1.ffn_down.weight"), DType::Q8_0);
  }
  {
    // tiny256: 2 layers, 2 query heads per KV head.
    GGUFFile f(generate(dir, "tiny256", "q2_k"));
    EXPECT_EQ(f.get_uint("general.file_type"), 10u);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_q.weight"), DType::Q2_K);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_up.weight"), DType::Q2_K);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_v.weight"), DType::Q3_K);  // fewer than 4 per KV head
    EXPECT_EQ(tensor_type(f, "blk.0.attn_output.weight"), DType::Q3_K);
    EXPECT_EQ(tensor_type(f, "blk.1.ffn_down.weight"), DType::Q3_K);
    EXPECT_EQ(tensor_type(f, "token_embd.weight"), DType::Q6_K);
    GGUFFile m(generate(dir, "tiny256", "q3_k_m"));
    EXPECT_EQ(m.get_uint("general.file_type"), 12u);
    EXPECT_EQ(tensor_type(m, "blk.1.attn_k.weight"), DType::Q3_K);
    EXPECT_EQ(tensor_type(m, "blk.1.attn_v.weight"), DType::Q5_K);  // layers < 2
    EXPECT_EQ(tensor_type(m, "blk.0.attn_output.weight"), DType::Q4_K);
    EXPECT_EQ(tensor_type(m, "blk.0.ffn_down.weight"), DType::Q4_K);  // layers < 2 / 16: none
    GGUFFile l(generate(dir, "tiny256", "q3_k_l"));
    EXPECT_EQ(tensor_type(l, "blk.0.ffn_gate.weight"), DType::Q3_K);
    EXPECT_EQ(tensor_type(l, "blk.0.ffn_down.weight"), DType::Q5_K);
    EXPECT_EQ(tensor_type(l, "blk.0.attn_output.weight"), DType::Q5_K);
    // 64-wide rows: the 2- and 3-bit types fall back to Q4_0.
    GGUFFile t(generate(dir, "tiny", "q3_k_s"));
    EXPECT_EQ(tensor_type(t, "blk.0.ffn_up.weight"), DType::Q4_0);
  }
  {
    // llama.cpp's IQ4_XS and IQ4_NL file types (30, 25): the base type but for the tied output
    // (Q6_K); tiny256's 2 query heads per KV head and 2 layers (fewer than 8) keep attn_v and
    // ffn_down at it too.
    GGUFFile f(generate(dir, "tiny256", "iq4_xs"));
    EXPECT_EQ(f.get_uint("general.file_type"), 30u);
    EXPECT_EQ(tensor_type(f, "token_embd.weight"), DType::Q6_K);
    EXPECT_EQ(tensor_type(f, "blk.0.attn_v.weight"), DType::IQ4_XS);
    EXPECT_EQ(tensor_type(f, "blk.0.ffn_down.weight"), DType::IQ4_XS);
    EXPECT_EQ(tensor_type(f, "blk.1.attn_q.weight"), DType::IQ4_XS);
    // 64-wide rows: IQ4_XS -> IQ4_NL, Q6_K -> Q8_0.
    GGUFFile t(generate(dir, "tiny", "iq4_xs"));
    EXPECT_EQ(tensor_type(t, "blk.0.ffn_up.weight"), DType::IQ4_NL);
    EXPECT_EQ(tensor_type(t, "token_embd.weight"), DType::Q8_0);
    GGUFFile n(generate(dir, "tiny", "iq4_nl"));
    EXPECT_EQ(n.get_uint("general.file_type"), 25u);
    EXPECT_EQ(tensor_type(n, "blk.1.attn_k.weight"), DType::IQ4_NL);
  }
  // IQ4 on Llama 3.1 8B (32 layers, 4 query heads per KV head): attn_v Q5_K, ffn_down Q5_K in
  // layers 0-3; on Qwen2.5-0.5B's 896-wide rows (7 per KV head) attn_v falls back to Q5_1 and
  // the IQ4_XS matrices to IQ4_NL, while its 4864-wide ffn_down rows keep IQ4_XS.
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_XS, "blk.9.attn_v.weight", 4096, 32, false, 4),
            DType::Q5_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_NL, "blk.3.ffn_down.weight", 14336, 32, false, 4),
            DType::Q5_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_XS, "blk.4.ffn_down.weight", 14336, 32, false, 4),
            DType::IQ4_XS);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_XS, "blk.5.attn_v.weight", 896, 24, true, 7),
            DType::Q5_1);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_XS, "blk.5.attn_q.weight", 896, 24, true, 7),
            DType::IQ4_NL);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::IQ4_XS, "blk.5.ffn_down.weight", 4864, 24, true, 7),
            DType::IQ4_XS);
  // Llama 3.1 8B (32 layers, 4 query heads per KV head): Q3_K_M's ffn_down is Q5_K in layers
  // 0-1, Q4_K after; its attn_v Q5_K in layers 0-1; Q2_K's attn_v Q4_K (Q3_K without GQA).
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q3_K_M, "blk.1.ffn_down.weight", 14336, 32, false, 4),
            DType::Q5_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q3_K_M, "blk.2.ffn_down.weight", 14336, 32, false, 4),
            DType::Q4_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q3_K_M, "blk.2.attn_v.weight", 4096, 32, false, 4),
            DType::Q4_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q2_K, "blk.2.attn_v.weight", 4096, 32, false, 4),
            DType::Q4_K);
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q2_K, "blk.2.attn_v.weight", 4096, 32, false, 1),
            DType::Q3_K);
  // The 32 layers of Llama 3.1 8B: llama.cpp's Q4_K_M gives attn_v / ffn_down Q6_K in layers
  // 0-3, 6, 9, ..., 27 (every third after the first eighth) and 28-31.
  std::vector<int> more;
  for (uint32_t i = 0; i < 32; ++i)
    if (quant_mix_tensor_dtype(QuantMix::Q4_K_M, "blk." + std::to_string(i) + ".attn_v.weight",
                               4096, 32, false) == DType::Q6_K)
      more.push_back(int(i));
  EXPECT_EQ(more, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q4_K_M, "token_embd.weight", 4096, 32, false),
            DType::Q4_K);  // untied: the embedding keeps the base type
  EXPECT_EQ(quant_mix_tensor_dtype(QuantMix::Q4_K_M, "output.weight", 4096, 32, false),
            DType::Q6_K);
}

// Relative RMS difference of all logits from the f32 model's, measured over seeds 3-6 (40-token
// prefill / 3-token prefill): q4_k_m 0.135-0.167 / 0.133-0.138, q4_k_s 0.130-0.154 /
// 0.115-0.141, q5_k_m 0.079-0.088 / 0.067-0.085, q6_k 0.043-0.053 / 0.041-0.047, q3_k_s
// 0.305-0.382 / 0.267-0.330, q3_k_m 0.170-0.203 / 0.133-0.162 (its attn_v, attn_output and
// ffn_down are Q4_K/Q5_K), q3_k_l 0.145-0.167 / 0.101-0.124, q2_k 0.373-0.448 / 0.287-0.364,
// iq4_nl 0.151-0.198 / 0.136-0.174, iq4_xs 0.159-0.202 / 0.132-0.175; the same model in Q8_0
// 0.017-0.023 and in Q4_0 0.21-0.26. Bounds: ~20 % above the largest; the 4-bit mixes must also
// beat Q4_0 (as llama.cpp's do). A layout or kernel bug gives errors near 1 or more.
TEST(KQuantModel, LogitsCloseToF32) {
  TempDir dir;
  auto ref = test::make_engine(load(generate(dir, "tiny256", "f32")), 16);
  const auto long_prompt = random_tokens(40, 1), short_prompt = random_tokens(3, 2);
  const auto ref_long = test::prefill_logits(*ref, long_prompt);
  const auto ref_short = test::prefill_logits(*ref, short_prompt);
  auto q40 = test::make_engine(load(generate(dir, "tiny256", "q4_0")), 16);
  const double q40_err = rel_rms(test::prefill_logits(*q40, long_prompt), ref_long);
  const std::pair<const char*, double> bounds[] = {
      {"q4_k_m", 0.2},   {"q4_k_s", 0.19}, {"q5_k_m", 0.105}, {"q6_k", 0.065},  {"q3_k_s", 0.46},
      {"q3_k_m", 0.245}, {"q3_k_l", 0.2},  {"q2_k", 0.54},    {"iq4_nl", 0.24}, {"iq4_xs", 0.24}};
  for (const auto& [mix, bound] : bounds) {
    auto e = test::make_engine(load(generate(dir, "tiny256", mix)), 16);
    const double long_err = rel_rms(test::prefill_logits(*e, long_prompt), ref_long);
    const double short_err = rel_rms(test::prefill_logits(*e, short_prompt), ref_short);
    EXPECT_LT(long_err, bound) << mix;
    EXPECT_LT(short_err, bound) << mix;
    if (std::string(mix).starts_with("q4") || std::string(mix).starts_with("iq4")) {
      EXPECT_LT(long_err, q40_err) << mix;
    }
  }
  // The 32-block types, seeds 3-6 (long / short): q4_1 0.200-0.237 / 0.184-0.229, q5_0
  // 0.113-0.134 / 0.111-0.126, q5_1 0.096-0.118 / 0.084-0.104; the 5-bit ones beat Q4_0.
  const std::pair<const char*, double> legacy_bounds[] = {
      {"q4_1", 0.285}, {"q5_0", 0.16}, {"q5_1", 0.14}};
  for (const auto& [dt, bound] : legacy_bounds) {
    auto e = test::make_engine(load(generate(dir, "tiny256", dt)), 16);
    const double long_err = rel_rms(test::prefill_logits(*e, long_prompt), ref_long);
    const double short_err = rel_rms(test::prefill_logits(*e, short_prompt), ref_short);
    EXPECT_LT(long_err, bound) << dt;
    EXPECT_LT(short_err, bound) << dt;
    if (std::string(dt).starts_with("q5")) {
      EXPECT_LT(long_err, q40_err) << dt;
    }
  }
}

// The whole forward on the portable kernels gives each SIMD level's logits up to f32 rounding
// (AVX2 is run capped on AVX-512 hosts too). All of them multiply the same integers (the AVX2
// K-quant GEMM included; 40 tokens take it), so the only differences are f32 summation order
// and, now and then, a last-bit difference moving an activation across a rounding boundary of
// the next int8 quantisation. Measured relative RMS, 40-token / 3-token prompt, on the tiny256
// mixes (one 256-block per row): AVX2 0 / 1.4e-7, AVX-512 1.4e-7-4.8e-4 / 1.4e-7. The same
// for the 32-block fallbacks of the mixes on 64-wide rows: tiny q4_k_m (Q5_0, Q8_0) and
// q5_k_m (Q5_1, Q8_0), whose 40-token AVX2 products take the f32 GEMM on dequantised weights
// (q5_k_m 0.0068 / 6.5e-8). One such flip moves a tiny model's logits by 2e-3-3e-3 (measured
// on 3-token prompts of the tiny model: 1 in 6 seeds for Q4_0 and for IQ4_NL, none for Q8_0), so
// three short prompts are run and the median must show f32 rounding only, every one within the
// long prompt's bound.
TEST(KQuantModel, ScalarKernelsMatchSimd) {
  if (!isa_supported(KernelIsa::Avx2)) GTEST_SKIP() << "no SIMD kernels on this CPU";
  TempDir dir;
  const std::pair<const char*, const char*> models[] = {
      {"tiny256", "q4_k_m"}, {"tiny256", "q3_k_m"}, {"tiny256", "q2_k"}, {"tiny", "q4_k_m"},
      {"tiny", "q5_k_m"},    {"tiny256", "iq4_xs"}, {"tiny", "iq4_xs"}};
  for (const auto& [preset, mix] : models) {
    const std::string path = generate(dir, preset, mix);
    const auto long_prompt = random_tokens(40, 1);
    const std::vector<std::vector<int32_t>> short_prompts = {
        random_tokens(3, 2), random_tokens(3, 3), random_tokens(3, 4)};
    std::vector<std::vector<float>> s_long;
    std::vector<std::vector<std::vector<float>>> s_short;
    {
      ScopedIsaCap cap(KernelIsa::Scalar);
      auto scalar = test::make_engine(load(path), 16);
      s_long = test::prefill_logits(*scalar, long_prompt);
      for (const auto& p : short_prompts) s_short.push_back(test::prefill_logits(*scalar, p));
    }
    for (KernelIsa isa : {KernelIsa::Avx2, KernelIsa::Avx512}) {
      if (!isa_supported(isa)) continue;
      ScopedIsaCap cap(isa);
      auto simd = test::make_engine(load(path), 16);
      const double long_err = rel_rms(test::prefill_logits(*simd, long_prompt), s_long);
      EXPECT_LT(long_err, 0.03) << isa_name(isa) << " " << preset << " " << mix;
      std::vector<double> short_errs;
      for (size_t i = 0; i < short_prompts.size(); ++i)
        short_errs.push_back(rel_rms(test::prefill_logits(*simd, short_prompts[i]), s_short[i]));
      std::sort(short_errs.begin(), short_errs.end());
      EXPECT_LT(short_errs[1], 1e-5) << isa_name(isa) << " " << preset << " " << mix;
      EXPECT_LT(short_errs[2], 0.03) << isa_name(isa) << " " << preset << " " << mix;
    }
  }
}

// The Q4_K matrices of a Q4_K_M model packed at load into nibble panels (gemm_vnni_avx512.cpp,
// AVX512_VNNI) against the mapped rows: the same integer sums, scaled in f32 in another order.
// Measured relative RMS on tiny256 q4_k_m: decode 1.3e-7, 40-token prefill 3.3e-6; the bounds allow
// an int8 rounding of an activation moved now and then, as in ScalarKernelsMatchSimd.
TEST(KQuantModel, LoadTimePanelsKeepTheLogits) {
  TempDir dir;
  auto [rows_engine, panels_engine] =
      test::rows_and_panels(load(generate(dir, "tiny256", "q4_k_m")));
  Engine& rows = *rows_engine;
  Engine& panels = *panels_engine;
  if (panels.info().weight_bytes == rows.info().weight_bytes)
    GTEST_SKIP() << "no K-quant panels on this CPU (AVX512_VNNI)";
  const auto prompt = random_tokens(40, 1);
  const double decode_err =
      rel_rms(test::decode_logits(panels, prompt, 12), test::decode_logits(rows, prompt, 12));
  const double prefill_err =
      rel_rms(test::prefill_logits(panels, prompt), test::prefill_logits(rows, prompt));
  EXPECT_LT(decode_err, 1e-5);
  EXPECT_LT(prefill_err, 0.03);
}

// The same model on the AVX2 kernel level, where the Q4_K matrices are packed at load for the
// AVX2 decode kernel (gemv_panels_avx2.cpp) and prefill keeps reading the rows: decode logits from
// the panels against the rows' (the same integer sums, scaled in f32 in another order; on this
// model the differences rarely move an int8 activation of the next product, so the logits are
// often identical: Matmul.Avx2PanelsDecode checks the products themselves).
TEST(KQuantModel, Avx2LoadTimePanelsKeepTheLogits) {
  if (!isa_supported(KernelIsa::Avx2)) GTEST_SKIP() << "no AVX2";
  ScopedIsaCap cap(KernelIsa::Avx2);
  TempDir dir;
  auto [rows_engine, panels_engine] =
      test::rows_and_panels(load(generate(dir, "tiny256", "q4_k_m")));
  ASSERT_GT(panels_engine->info().weight_bytes, rows_engine->info().weight_bytes);
  const auto prompt = random_tokens(40, 1);
  const double decode_err = rel_rms(test::decode_logits(*panels_engine, prompt, 12),
                                    test::decode_logits(*rows_engine, prompt, 12));
  const double prefill_err = rel_rms(test::prefill_logits(*panels_engine, prompt),
                                     test::prefill_logits(*rows_engine, prompt));
  EXPECT_LT(decode_err, 1e-5);
  EXPECT_EQ(prefill_err, 0.0);  // 40 tokens: the integer GEMM over the rows either way
}

}  // namespace pith
