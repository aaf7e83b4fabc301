// LoRA adapters on the CPU engine: the PEFT and GGUF forms of one generated adapter load to the
// same matrices; a forward with an adapter equals the base model with the deltas merged into
// its weights (an independent computation of W + scale B A); a batch mixing the base and two
// adapters gives every sequence its single-adapter logits; bad adapters are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "engine/lora_adapter.h"
#include "engine_test_util.h"
#include "model_gen/lora_gen.h"
#include "model_gen/model_gen.h"

namespace pith {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("pith_lora_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

const TempDir& temp() {
  static TempDir dir;
  return dir;
}

std::string gen_adapter(const std::string& base, const std::string& name, const std::string& format,
                        uint64_t seed, std::vector<LoraTarget> targets = {}) {
  LoraGenOptions o;
  o.base_path = base;
  o.format = format;
  o.output = temp() / name;
  o.rank = 4;
  o.alpha = 8;
  o.seed = seed;
  o.std = 0.05f;
  o.targets = std::move(targets);
  generate_lora(o);
  return o.output;
}

using test::max_diff;
using test::random_tokens;

std::vector<float> to_f32(const WeightMatrix& m) {
  std::vector<float> out(m.rows * m.cols);
  for (size_t r = 0; r < m.rows; ++r)
    dequantize_row(m.dtype, m.row(r), out.data() + r * m.cols, m.cols);
  return out;
}

// The base with W + scale * B A written into every adapted matrix (f32).
std::shared_ptr<const ModelWeights> merged(const ModelWeights& base, const LoraAdapter& ad) {
  auto w = std::make_shared<ModelWeights>(base);
  for (uint32_t l = 0; l < w->layers.size(); ++l) {
    LayerWeights& L = w->layers[l];
    WeightMatrix* mats[kLoraTargets] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
    for (size_t t = 0; t < kLoraTargets; ++t) {
      const LoraPair* p = ad.pair(l, static_cast<LoraTarget>(t));
      if (!p) continue;
      WeightMatrix& m = *mats[t];
      auto buf = std::make_shared<std::vector<float>>(to_f32(m));
      const auto a = to_f32(p->a), b = to_f32(p->b);
      for (size_t o = 0; o < m.rows; ++o)
        for (size_t i = 0; i < m.cols; ++i) {
          double s = 0;
          for (size_t r = 0; r < p->rank(); ++r)
            s += double(b[o * p->rank() + r]) * a[r * m.cols + i];
          (*buf)[o * m.cols + i] += static_cast<float>(p->scale * s);
        }
      m = WeightMatrix{DType::F32, m.rows, m.cols, buf->data()};
      w->storage.push_back(buf);
    }
  }
  return w;
}

// Full logits of every position of `tokens` as one prefill with `adapter` (0: base).
std::vector<std::vector<float>> logits(Engine& e, const std::vector<int32_t>& tokens,
                                       uint32_t adapter) {
  const uint32_t ps = e.kv_pool().page_size();
  auto pages = e.kv_pool().allocate(test::pages_for(uint32_t(tokens.size()), ps));
  SequenceInput s = test::prefill_input(tokens, pages, ps);
  s.adapter = adapter;
  auto res = e.forward({s});
  e.kv_pool().free(pages);
  std::vector<std::vector<float>> out;
  for (auto& o : res[0].outputs) out.push_back(std::move(o.logits));
  return out;
}

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override { base_ = test::load_test_model("tiny-f32"); }
  std::shared_ptr<const ModelWeights> base_;
};

TEST_F(LoraAdapterTest, PeftAndGgufFormsOfOneAdapterAreTheSameMatrices) {
  const std::string base = test::model_path("tiny-f32");
  auto peft = load_lora_adapter(gen_adapter(base, "same-peft", "peft", 7), *base_);
  auto gguf = load_lora_adapter(gen_adapter(base, "same.gguf", "gguf", 7), *base_);
  EXPECT_EQ(peft->format, "peft");
  EXPECT_EQ(gguf->format, "gguf");
  EXPECT_EQ(peft->rank, 4u);
  EXPECT_EQ(peft->targets(), "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
  size_t pairs = 0;
  for (uint32_t l = 0; l < base_->config.n_layers; ++l)
    for (size_t t = 0; t < kLoraTargets; ++t) {
      const LoraPair* p = peft->pair(l, static_cast<LoraTarget>(t));
      const LoraPair* g = gguf->pair(l, static_cast<LoraTarget>(t));
      ASSERT_TRUE(p && g);
      EXPECT_FLOAT_EQ(p->scale, 2.0f);  // alpha 8 / rank 4
      EXPECT_EQ(to_f32(p->a), to_f32(g->a));
      EXPECT_EQ(to_f32(p->b), to_f32(g->b))
          << "layer " << l << " " << lora_target_name(LoraTarget(t));
      ++pairs;
    }
  EXPECT_EQ(pairs, size_t{base_->config.n_layers} * kLoraTargets);
  EXPECT_EQ(peft->weight_bytes(), gguf->weight_bytes());
}

TEST_F(LoraAdapterTest, ForwardWithAdapterEqualsMergedWeights) {
  auto ad =
      load_lora_adapter(gen_adapter(test::model_path("tiny-f32"), "merge-peft", "peft", 3), *base_);
  auto engine = test::make_engine(base_, 4);
  auto merged_engine = test::make_engine(merged(*base_, *ad), 4);
  engine->load_adapter(5, ad);
  auto tokens = random_tokens(21, 1);
  auto with = logits(*engine, tokens, 5);
  auto want = logits(*merged_engine, tokens, 0);
  auto plain = logits(*engine, tokens, 0);
  float changed = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_LT(max_diff(with[i], want[i]), 1e-4f) << "position " << i;
    changed = std::max(changed, max_diff(with[i], plain[i]));
  }
  EXPECT_GT(changed, 1e-2f) << "the adapter should change the logits";
}

TEST_F(LoraAdapterTest, MixedBatchGivesEachSequenceItsOwnAdapter) {
  const std::string base = test::model_path("tiny-f32");
  auto a = load_lora_adapter(gen_adapter(base, "mix-a.gguf", "gguf", 11), *base_);
  auto b = load_lora_adapter(
      gen_adapter(base, "mix-b", "peft", 12, {LoraTarget::Q, LoraTarget::V, LoraTarget::Down}),
      *base_);
  auto engine = test::make_engine(base_, 4);
  engine->load_adapter(1, a);
  engine->load_adapter(2, b);
  const std::vector<uint32_t> adapters = {0, 1, 2, 1, 0, 2};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<float>>> alone;
  for (size_t i = 0; i < adapters.size(); ++i) {
    prompts.push_back(random_tokens(5 + 3 * i, 20 + uint32_t(i)));
    alone.push_back(logits(*engine, prompts[i], adapters[i]));
  }
  // All six in one batch (sequences of one adapter are not adjacent: the gather path).
  std::vector<SequenceInput> batch;
  std::vector<std::vector<uint32_t>> pages;
  for (size_t i = 0; i < adapters.size(); ++i) {
    pages.push_back(engine->kv_pool().allocate(test::pages_for(uint32_t(prompts[i].size()), 4)));
    batch.push_back(test::prefill_input(prompts[i], pages.back(), 4));
    batch.back().adapter = adapters[i];
  }
  auto res = engine->forward(batch);
  for (size_t i = 0; i < adapters.size(); ++i)
    for (size_t p = 0; p < prompts[i].size(); ++p)
      EXPECT_LT(max_diff(res[i].outputs[p].logits, alone[i][p]), 2e-5f)
          << "sequence " << i << " (adapter " << adapters[i] << ") position " << p;
  // Decode one more token for each, still mixed, against a decode alone.
  for (size_t i = 0; i < adapters.size(); ++i) {
    const uint32_t pos = uint32_t(prompts[i].size());
    auto more = engine->kv_pool().allocate(1);
    pages[i].insert(pages[i].end(), more.begin(), more.end());
    SequenceInput s;
    s.tokens = {42};
    s.positions = {pos};
    s.kv_pages.assign(pages[i].begin(), pages[i].begin() + test::pages_for(pos + 1, 4));
    s.last_page_len = test::last_len(pos + 1, 4);
    s.outputs = {{0, OutputKind::Logits, 0, 0}};
    s.adapter = adapters[i];
    batch[i] = s;
  }
  auto decoded = engine->forward(batch);
  for (size_t i = 0; i < adapters.size(); ++i) {
    auto tokens = prompts[i];
    tokens.push_back(42);
    auto want = logits(*engine, tokens, adapters[i]);
    EXPECT_LT(max_diff(decoded[i].outputs[0].logits, want.back()), 2e-5f) << "sequence " << i;
  }
}

TEST_F(LoraAdapterTest, HfBaseWithPeftEqualsGgufBaseWithGgufAdapter) {
  ThreadPool pool(2);
  ModelGenOptions g;
  g.preset = "tiny";
  g.vocab_path = test::model_path("tiny-f32");
  g.seed = 9;
  g.quiet = true;
  g.output = temp() / "base.gguf";
  generate_model(g, pool);
  g.format = "hf";
  g.output = temp() / "base-hf";
  generate_model(g, pool);
  LoadOptions lo;
  lo.quiet = true;
  auto gguf_base = load_model(temp() / "base.gguf", lo);
  auto hf_base = load_model(temp() / "base-hf", lo);
  auto gguf_ad =
      load_lora_adapter(gen_adapter(temp() / "base.gguf", "x.gguf", "gguf", 4), *gguf_base);
  auto peft_ad = load_lora_adapter(gen_adapter(temp() / "base-hf", "x-peft", "peft", 4), *hf_base);
  auto e1 = test::make_engine(gguf_base, 4), e2 = test::make_engine(hf_base, 4);
  e1->load_adapter(1, gguf_ad);
  e2->load_adapter(1, peft_ad);
  auto tokens = random_tokens(13, 5);
  auto l1 = logits(*e1, tokens, 1), l2 = logits(*e2, tokens, 1);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_LT(max_diff(l1[i], l2[i]), 1e-5f) << i;
}

TEST_F(LoraAdapterTest, UnloadedAdapterIsABadBatchAndTouchesNoKv) {
  auto ad =
      load_lora_adapter(gen_adapter(test::model_path("tiny-f32"), "gone.gguf", "gguf", 1), *base_);
  auto engine = test::make_engine(base_, 4);
  engine->load_adapter(3, ad);
  engine->unload_adapter(3);
  auto pages = engine->kv_pool().allocate(2);
  std::vector<std::byte> before(2 * engine->kv_page_bytes()), after(before.size());
  engine->save_kv_pages(pages, before);
  SequenceInput s = test::prefill_input(random_tokens(6, 1), pages, 4);
  s.adapter = 3;
  try {
    engine->forward({s});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adapter 3 is not loaded"), std::string::npos) << e.what();
  }
  engine->save_kv_pages(pages, after);
  EXPECT_EQ(before, after);
}

std::string load_error(const std::string& path, const ModelWeights& base) {
  try {
    load_lora_adapter(path, base);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST_F(LoraAdapterTest, BadAdaptersAreRefusedByName) {
  // Another base shape.
  ThreadPool pool(2);
  ModelGenOptions g;
  g.preset = "tiny256";
  g.vocab_path = test::model_path("tiny-f32");
  g.quiet = true;
  g.output = temp() / "wide.gguf";
  generate_model(g, pool);
  const std::string wide_peft = gen_adapter(temp() / "wide.gguf", "wide-peft", "peft", 1);
  const std::string wide_gguf = gen_adapter(temp() / "wide.gguf", "wide.gguf.lora", "gguf", 1);
  EXPECT_NE(load_error(wide_peft, *base_).find("another base model"), std::string::npos)
      << load_error(wide_peft, *base_);
  EXPECT_NE(load_error(wide_gguf, *base_).find("another base model"), std::string::npos)
      << load_error(wide_gguf, *base_);
  // A model file is not an adapter.
  EXPECT_NE(load_error(test::model_path("tiny-f32"), *base_).find("not an adapter"),
            std::string::npos);
  // A folder without adapter_config.json, DoRA, missing file.
  fs::create_directories(temp() / "empty");
  EXPECT_NE(load_error(temp() / "empty", *base_).find("no adapter_config.json"), std::string::npos);
  const std::string dora = gen_adapter(test::model_path("tiny-f32"), "dora", "peft", 1);
  {
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dora + "/adapter_config.json"));
    cfg["use_dora"] = true;
    std::ofstream(dora + "/adapter_config.json") << cfg.dump();
  }
  EXPECT_NE(load_error(dora, *base_).find("DoRA"), std::string::npos);
  EXPECT_NE(load_error(temp() / "nope", *base_).find("no such file"), std::string::npos);
}

TEST_F(LoraAdapterTest, RsLoraScalesBySquareRootOfRank) {
  const std::string dir = gen_adapter(test::model_path("tiny-f32"), "rs", "peft", 2);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir + "/adapter_config.json"));
  cfg["use_rslora"] = true;
  std::ofstream(dir + "/adapter_config.json") << cfg.dump();
  auto ad = load_lora_adapter(dir, *base_);
  EXPECT_FLOAT_EQ(ad->pair(0, LoraTarget::Q)->scale, 8.0f / 2.0f);  // alpha / sqrt(4)
}

TEST(LoraTargets, ParseNamesAndRefuseOthers) {
  EXPECT_TRUE(parse_lora_targets("all").empty());
  auto t = parse_lora_targets("q,v_proj,down");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], LoraTarget::Q);
  EXPECT_EQ(t[1], LoraTarget::V);
  EXPECT_EQ(t[2], LoraTarget::Down);
  EXPECT_THROW(parse_lora_targets("q,lm_head"), Error);
}

}  // namespace
}  // namespace pith
