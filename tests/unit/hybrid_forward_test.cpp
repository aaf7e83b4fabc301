// The forward handler on hybrid models (tiny random Qwen3.5, dense and MoE: 3 Gated DeltaNet
// layers with 4 value heads on 2 key heads, 1 gated attention layer with partial rotary): the
// recurrent state carries a sequence across calls exactly like KV does for attention — one prefill,
// N decodes or a prefill in pieces agree; sequences batched together keep their own states; a
// copied state forks a sequence; saved and loaded state images restore it; and batches that
// break the state's rules are rejected before anything changes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include <unistd.h>

#include "common/error.h"
#include "engine_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "generated_model.h"
#include "model_gen/model_gen.h"
#include "multimodal_checkpoint.h"

namespace pith {
namespace {

constexpr float kTol = 2e-5f;
constexpr uint32_t kPageSize = 4;

using test::max_diff;
using test::random_tokens;

// A tiny random model of hybrid family `arch`, generated once per process.
std::shared_ptr<const ModelWeights> hybrid_model(const std::string& arch) {
  return test::generated_model(arch, 9);
}

class HybridForward : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { engine_ = test::make_engine(hybrid_model(GetParam()), kPageSize); }
  Engine& e() { return *engine_; }

  // Inputs tokens[from, to) of a sequence at positions from.., over `pages`, with `state`.
  SequenceInput piece(const std::vector<int32_t>& tokens, uint32_t from, uint32_t to,
                      const std::vector<uint32_t>& pages, uint32_t state) {
    SequenceInput s =
        test::prefill_input({tokens.begin() + from, tokens.begin() + to}, pages, kPageSize, from);
    s.state_slot = state;
    return s;
  }
  std::vector<uint32_t> pages(uint32_t n) {
    return e().kv_pool().allocate(test::pages_for(n, kPageSize));
  }

  std::unique_ptr<Engine> engine_;
};

TEST_P(HybridForward, ModelIsHybrid) {
  const ModelConfig& c = e().config();
  EXPECT_TRUE(c.hybrid());
  EXPECT_EQ(c.n_recurrent_layers(), 3u);
  EXPECT_EQ(c.n_kv_layers(), 1u);
  EXPECT_EQ(c.kv_layer(3), 0u);
  EXPECT_EQ(e().kv_pool().shape().n_layers, 1u);  // KV only for the attention layer
  EXPECT_GT(e().state_slots().capacity(), 0u);
  EXPECT_EQ(e().state_bytes(), c.recurrent_state_floats() * sizeof(float));
}

TEST_P(HybridForward, PrefillEqualsSingleTokenDecodesAndPieces) {
  auto tokens = random_tokens(37, 1);
  auto whole = test::prefill_logits(e(), tokens);
  auto decoded = test::decode_logits(e(), tokens, 37);
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_LT(max_diff(decoded[i], whole[i]), kTol) << "position " << i;
  // In pieces of 10, 1 and 26 tokens (chunked, recurrent, then across a 64-token chunk).
  auto p = pages(37);
  const uint32_t state = test::new_state(e());
  std::vector<std::vector<float>> got;
  for (auto [from, to] : {std::pair{0u, 10u}, {10u, 11u}, {11u, 37u}}) {
    auto res = e().forward({piece(tokens, from, to, p, state)});
    for (auto& o : res[0].outputs) got.push_back(std::move(o.logits));
  }
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_LT(max_diff(got[i], whole[i]), kTol) << "position " << i;
}

TEST_P(HybridForward, LongPromptAcrossDeltaRuleChunks) {
  auto tokens = random_tokens(150, 2);  // chunks of 64, 64, 22
  auto whole = test::prefill_logits(e(), tokens);
  auto decoded = test::decode_logits(e(), tokens, 150);
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_LT(max_diff(decoded[i], whole[i]), 1e-4f) << "position " << i;
}

TEST_P(HybridForward, BatchedSequencesKeepTheirOwnStates) {
  auto ta = random_tokens(11, 3), tb = random_tokens(23, 4), tc = random_tokens(9, 5);
  auto alone_a = test::prefill_logits(e(), ta);
  auto alone_b = test::prefill_logits(e(), tb);
  auto alone_c = test::prefill_logits(e(), tc);
  auto pa = pages(11), pb = pages(23), pc = pages(9);
  const uint32_t sa = test::new_state(e()), sb = test::new_state(e()), sc = test::new_state(e());
  e().forward({piece(tb, 0, 15, pb, sb), piece(tc, 0, 8, pc, sc)});
  auto res =
      e().forward({piece(tb, 15, 23, pb, sb), piece(ta, 0, 11, pa, sa), piece(tc, 8, 9, pc, sc)});
  for (size_t i = 0; i < ta.size(); ++i)
    EXPECT_LT(max_diff(res[1].outputs[i].logits, alone_a[i]), kTol);
  for (size_t i = 0; i < 8; ++i)
    EXPECT_LT(max_diff(res[0].outputs[i].logits, alone_b[15 + i]), kTol);
  EXPECT_LT(max_diff(res[2].outputs[0].logits, alone_c[8]), kTol);
}

TEST_P(HybridForward, CopiedStateAndKvForkTheSequence) {
  // A 12-token prefix, then two continuations: the original's, and a fork made by copying the
  // state and the prefix's KV. Each branch equals a straight run of its own tokens.
  auto a = random_tokens(20, 6), b = a;
  for (size_t i = 12; i < b.size(); ++i) b[i] = (a[i] * 7 + 3) % 1000;
  auto straight_a = test::prefill_logits(e(), a);
  auto straight_b = test::prefill_logits(e(), b);
  auto pa = pages(20), pb = pages(20);
  const uint32_t sa = test::new_state(e()), sb = e().states().slots().allocate(1)[0];
  e().forward({piece(a, 0, 12, pa, sa)});
  e().copy_state(sa, sb);
  for (uint32_t page = 0; page < 12 / kPageSize; ++page)
    e().copy_kv(pa[page], pb[page], 0, 0, kPageSize);
  auto res = e().forward({piece(a, 12, 20, pa, sa), piece(b, 12, 20, pb, sb)});
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_LT(max_diff(res[0].outputs[i].logits, straight_a[12 + i]), kTol);
    EXPECT_LT(max_diff(res[1].outputs[i].logits, straight_b[12 + i]), kTol);
  }
}

TEST_P(HybridForward, SavedStateImagesRestoreTheSequence) {
  auto t = random_tokens(16, 7);
  auto straight = test::prefill_logits(e(), t);
  auto p = pages(16);
  const uint32_t s = test::new_state(e());
  e().forward({piece(t, 0, 9, p, s)});
  std::vector<std::byte> image(e().state_bytes());
  const uint32_t ids[] = {s};
  e().save_states(ids, image);
  e().clear_states(ids);  // forget it, then restore into another slot
  const uint32_t other = e().states().slots().allocate(1)[0];
  const uint32_t other_ids[] = {other};
  e().load_states(other_ids, image);
  auto res = e().forward({piece(t, 9, 16, p, other)});
  for (size_t i = 0; i < 7; ++i)
    EXPECT_LT(max_diff(res[0].outputs[i].logits, straight[9 + i]), kTol);
  std::vector<std::byte> short_image(image.size() - 4);
  EXPECT_THROW(e().save_states(ids, short_image), Error);
  const uint32_t unallocated[] = {e().states().slots().capacity() - 1};
  EXPECT_THROW(e().load_states(unallocated, image), Error);
  EXPECT_THROW(e().copy_state(s, e().states().slots().capacity()), Error);
}

TEST_P(HybridForward, BatchesThatBreakTheStateRulesAreRejected) {
  auto t = random_tokens(8, 8);
  auto p = pages(8), q = pages(8);
  const uint32_t s = test::new_state(e());
  std::vector<float> before(e().states().slot(s), e().states().slot(s) + 64);
  SequenceInput good = piece(t, 0, 8, p, s);
  SequenceInput no_state = good;
  no_state.state_slot = SequenceInput::kNoState;
  EXPECT_THROW(e().forward({no_state}), Error);
  SequenceInput unallocated = good;
  unallocated.state_slot = e().states().slots().capacity() - 1;
  EXPECT_THROW(e().forward({unallocated}), Error);
  SequenceInput masked = good;
  for (uint32_t i = 0; i < 8; ++i) masked.mask.push_back({i + 1, 7 - i});
  EXPECT_THROW(e().forward({masked}), Error);
  SequenceInput twice = piece(t, 0, 8, q, s);
  EXPECT_THROW(e().forward({good, twice}), Error);
  // Nothing ran: the state is as it was, and the good batch still runs.
  EXPECT_EQ(std::vector<float>(e().states().slot(s), e().states().slot(s) + 64), before);
  EXPECT_EQ(e().forward({good})[0].outputs.size(), 8u);
}

// Qwen3.5 dense, and with its mixture-of-experts FFN (qwen35moe).
INSTANTIATE_TEST_SUITE_P(Families, HybridForward, ::testing::Values("qwen35", "qwen35moe"));

// Published Qwen3.5 checkpoints are Qwen3_5ForConditionalGeneration: the language model's
// config under text_config and its tensors under model.language_model., beside a vision tower
// and multi-token-prediction weights. A generated Qwen3_5ForCausalLM folder rewritten into that
// layout gives the same logits.
TEST(HybridLoading, MultimodalCheckpointLoadsItsLanguageModel) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pith_mm_" + std::to_string(getpid()));
  fs::remove_all(dir);
  test::generate_hf_folder("qwen35", 9, dir / "causal");
  test::MultimodalLayout layout;
  layout.hf_class = "Qwen3_5ForConditionalGeneration";
  layout.model_type = "qwen3_5";
  layout.text_model_type = "qwen3_5_text";
  test::write_multimodal_folder(dir / "causal", dir / "mm", layout);
  LoadOptions lo;
  lo.quiet = true;
  auto causal_engine = test::make_engine(load_model((dir / "causal").string(), lo), kPageSize);
  auto mm_weights = load_model((dir / "mm").string(), lo);
  EXPECT_EQ(mm_weights->config.architecture, "qwen35");
  auto mm_engine = test::make_engine(mm_weights, kPageSize);
  auto tokens = random_tokens(12, 4);
  auto a = test::prefill_logits(*causal_engine, tokens);
  auto b = test::prefill_logits(*mm_engine, tokens);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "position " << i;
  fs::remove_all(dir);
}

// llama.cpp's converter appends Qwen3.5's multi-token-prediction block after the decoder layers
// (block_count + 1, nextn_predict_layers = 1, one more entry in attention.recurrent_layers, an
// attention block with nextn.* tensors). Such a file gives the logits of the decoder alone.
TEST(HybridLoading, MultiTokenPredictionBlocksAreNotRun) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pith_mtp_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string plain = (dir / "plain.gguf").string(), mtp = (dir / "mtp.gguf").string();
  {
    ThreadPool pool(2);
    ModelGenOptions g;
    g.preset = "tiny";
    g.arch = "qwen35";
    g.vocab_path = test::model_path("tiny-f32");
    g.seed = 9;
    g.quiet = true;
    g.output = plain;
    generate_model(g, pool);
  }
  {
    GGUFFile in(plain);
    const uint32_t n = static_cast<uint32_t>(in.get_uint("qwen35.block_count"));
    std::vector<uint8_t> recurrent;
    const auto& layers = std::get<GGUFArray>(in.find("qwen35.attention.recurrent_layers")->v);
    recurrent.assign(layers.data, layers.data + layers.count);
    recurrent.push_back(0);  // the MTP block: attention
    GGUFWriter out(mtp);
    for (const auto& [key, value] : in.metadata()) {
      if (key == "qwen35.attention.recurrent_layers")
        out.set(key, {GGUFType::ARRAY,
                      GGUFArray{GGUFType::BOOL, recurrent.size(), recurrent.data(), {}}});
      else if (key == "qwen35.block_count")
        out.set_u32(key, n + 1);
      else if (key != "general.alignment")
        out.set(key, value);
    }
    out.set_u32("qwen35.nextn_predict_layers", 1);
    // The block: a copy of the last (attention) layer's tensors, plus its nextn tensors.
    std::vector<const GGUFTensorInfo*> copies;
    const std::string last = "blk." + std::to_string(n - 1) + ".",
                      extra = "blk." + std::to_string(n) + ".";
    for (const auto& t : in.tensors()) {
      out.add_tensor(t.name, t.dims, t.dtype);
      if (t.name.starts_with(last)) copies.push_back(&t);
    }
    for (const GGUFTensorInfo* t : copies)
      out.add_tensor(extra + t->name.substr(last.size()), t->dims, t->dtype);
    const uint64_t d = in.get_uint("qwen35.embedding_length");
    std::vector<float> eh(2 * d * d, 0.01f), norm(d, 1.0f);
    out.add_tensor(extra + "nextn.eh_proj.weight", {2 * d, d}, DType::F32);
    out.add_tensor(extra + "nextn.enorm.weight", {d}, DType::F32);
    out.add_tensor(extra + "nextn.hnorm.weight", {d}, DType::F32);
    for (const auto& t : in.tensors()) out.write(t.data, t.n_bytes);
    for (const GGUFTensorInfo* t : copies) out.write(t->data, t->n_bytes);
    out.write(eh.data(), eh.size() * 4);
    out.write(norm.data(), norm.size() * 4);
    out.write(norm.data(), norm.size() * 4);
    out.finish();
  }
  LoadOptions lo;
  lo.quiet = true;
  auto with_mtp = load_model(mtp, lo);
  EXPECT_EQ(with_mtp->config.n_layers, 4u);
  auto a = test::make_engine(load_model(plain, lo), kPageSize);
  auto b = test::make_engine(with_mtp, kPageSize);
  auto tokens = random_tokens(10, 5);
  auto la = test::prefill_logits(*a, tokens), lb = test::prefill_logits(*b, tokens);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i], lb[i]) << "position " << i;
  fs::remove_all(dir);
}

// A Qwen3.5 config that turns the attention output gate off asks for something pith does not
// run: refused by name, not ignored.
TEST(HybridLoading, UngatedAttentionIsRefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pith_ungated_" + std::to_string(getpid()));
  fs::remove_all(dir);
  ThreadPool pool(2);
  ModelGenOptions g;
  g.preset = "tiny";
  g.arch = "qwen35";
  g.format = "hf";
  g.vocab_path = test::model_path("tiny-f32");
  g.quiet = true;
  g.output = dir.string();
  generate_model(g, pool);
  nlohmann::json cfg;
  std::ifstream(dir / "config.json") >> cfg;
  cfg["attn_output_gate"] = false;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  LoadOptions lo;
  lo.quiet = true;
  try {
    load_model(dir.string(), lo);
    ADD_FAILURE() << "an ungated Qwen3.5 config loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_output_gate"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(PlainModel, RefusesStateSlotsAndHasNone) {
  auto engine = test::make_engine(test::load_test_model("tiny-f32"), kPageSize);
  EXPECT_EQ(engine->state_slots().capacity(), 0u);
  auto p = engine->kv_pool().allocate(2);
  SequenceInput s = test::prefill_input(random_tokens(5, 1), p, kPageSize);
  s.state_slot = 0;
  EXPECT_THROW(engine->forward({s}), Error);
}

}  // namespace
}  // namespace pith
