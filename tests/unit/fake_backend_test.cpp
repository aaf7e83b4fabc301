// The weightless FakeBackend against the contract of engine/backend.h. The invariants of the
// forward handler (one prefill or chunks, pages in any physical order, a masked slot or a
// missing token, Embed inputs or tokens, output Embed + next_dist or TopK, forks over shared
// pages and copy_kv) run on both the CPU engine (tiny model, to float noise) and the fake
// (exactly), so the fake behaves like the real thing where the layers above can tell. Then the
// fake's own promises: no weights, what is visible decides the output, proper distributions,
// scripts, the same validation messages as the engine, delay, failure injection, counters.
#include "engine/fake_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <random>

#include "backend/forward_profile.h"
#include "common/error.h"
#include "engine/gguf_loader.h"
#include "engine/token_distribution.h"
#include "engine_test_util.h"
#include "formats/gguf.h"

namespace pith {
namespace {

constexpr uint32_t kPageSize = 4;  // small pages: many page boundaries

using test::max_diff;
using test::random_tokens;

BackendOptions small_options() {
  BackendOptions o;
  o.kv_page_size = kPageSize;
  o.kv_memory_bytes = size_t{8} << 20;
  o.max_embeds = 1024;
  o.n_threads = 2;
  return o;
}

// The tiny model's config without its tensors: all the fake needs.
ModelConfig tiny_config() {
  return gguf_model_config(GGUFFile(test::model_path("tiny-f32")));
}

std::vector<std::vector<float>> logits_of(std::vector<SequenceResult> r) {
  std::vector<std::vector<float>> out;
  for (auto& o : r[0].outputs) out.push_back(std::move(o.logits));
  return out;
}

// ---- the contract, on both backends ----

class BackendContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu")
      backend_ = std::make_unique<Engine>(test::load_test_model("tiny-f32"), small_options());
    else
      backend_ = std::make_unique<FakeBackend>(tiny_config(), small_options());
  }
  Backend& b() { return *backend_; }
  // The fake is exact; the engine agrees to summation-order noise.
  float tol() const { return GetParam() == "cpu" ? 2e-5f : 0.0f; }

  std::vector<uint32_t> pages(uint32_t n_tokens) {
    return b().page_slots().allocate(test::pages_for(n_tokens, kPageSize));
  }
  std::vector<std::vector<float>> prefill(const std::vector<int32_t>& tokens) {
    auto p = pages(uint32_t(tokens.size()));
    auto out = logits_of(b().forward({test::prefill_input(tokens, p, kPageSize)}));
    b().page_slots().free(p);
    return out;
  }
  void expect_same(const std::vector<float>& a, const std::vector<float>& b,
                   const std::string& what) {
    EXPECT_LE(max_diff(a, b), tol()) << what;
  }

  std::unique_ptr<Backend> backend_;
};

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract, ::testing::Values("cpu", "fake"),
                         [](const auto& info) { return info.param; });

TEST_P(BackendContract, ChunkedPrefillEqualsOnePrefill) {
  auto tokens = random_tokens(30, 1);
  auto whole = prefill(tokens);
  auto p = pages(30);
  std::vector<std::vector<float>> chunked;
  for (uint32_t first : {0u, 7u, 14u, 21u}) {
    const uint32_t end = std::min<uint32_t>(30, first + (first == 21 ? 9 : 7));
    auto part = logits_of(b().forward({test::prefill_input(
        {tokens.begin() + first, tokens.begin() + end}, p, kPageSize, first)}));
    for (auto& l : part) chunked.push_back(std::move(l));
  }
  ASSERT_EQ(chunked.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i)
    expect_same(chunked[i], whole[i], "input " + std::to_string(i));
  // And the outputs do depend on the context: the same token after a different prefix differs.
  auto other = tokens;
  other[3] = other[3] == 5 ? 6 : 5;
  EXPECT_GT(max_diff(prefill(other)[29], whole[29]), 1e-3f);
  expect_same(prefill(other)[2], whole[2], "input 2 cannot see slot 3");
}

TEST_P(BackendContract, BatchEqualsEachAlone) {
  auto ta = random_tokens(9, 2), tb = random_tokens(13, 3);
  auto alone_a = prefill(ta), alone_b = prefill(tb);
  auto pa = pages(9), pb = pages(13);
  auto r =
      b().forward({test::prefill_input(ta, pa, kPageSize), test::prefill_input(tb, pb, kPageSize)});
  for (size_t i = 0; i < ta.size(); ++i) expect_same(r[0].outputs[i].logits, alone_a[i], "a");
  for (size_t i = 0; i < tb.size(); ++i) expect_same(r[1].outputs[i].logits, alone_b[i], "b");
}

TEST_P(BackendContract, ShuffledPhysicalPagesEqualOrdered) {
  auto tokens = random_tokens(30, 5);
  auto ordered = prefill(tokens);
  auto p = b().page_slots().allocate(20);
  std::mt19937 rng(7);
  std::shuffle(p.begin(), p.end(), rng);
  auto r = b().forward({test::prefill_input(tokens, p, kPageSize)});
  for (size_t i = 0; i < tokens.size(); ++i)
    expect_same(r[0].outputs[i].logits, ordered[i], "input");
}

// Hiding slot 4 from every later input == the sequence without token 4, positions kept; an
// explicit causal mask == no mask.
TEST_P(BackendContract, MaskedSlotEqualsSequenceWithoutIt) {
  const uint32_t n = 13, gone = 4;
  auto tokens = random_tokens(n, 6);
  std::vector<int32_t> without;
  std::vector<uint32_t> pos_without;
  for (uint32_t i = 0; i < n; ++i)
    if (i != gone) {
      without.push_back(tokens[i]);
      pos_without.push_back(i);
    }
  SequenceInput s1 = test::prefill_input(without, pages(n), kPageSize);
  s1.positions = pos_without;
  auto ref = logits_of(b().forward({s1}));
  SequenceInput s2 = test::prefill_input(tokens, pages(n), kPageSize);
  for (uint32_t i = 0; i < n; ++i) {
    if (i <= gone)
      s2.mask.push_back({i + 1, n - i - 1});
    else
      s2.mask.push_back({gone, 1, i - gone, n - i - 1});
  }
  auto masked = logits_of(b().forward({s2}));
  for (uint32_t i = 0, j = 0; i < n; ++i) {
    if (i == gone) continue;
    expect_same(masked[i], ref[j++], "input " + std::to_string(i));
  }
  auto plain = prefill(tokens);
  EXPECT_GT(max_diff(masked[n - 1], plain[n - 1]), 1e-3f) << "hiding a slot changes the output";
  SequenceInput s3 = test::prefill_input(tokens, pages(n), kPageSize);
  for (uint32_t i = 0; i < n; ++i) s3.mask.push_back({i + 1, n - i - 1});
  auto causal = logits_of(b().forward({s3}));
  for (uint32_t i = 0; i < n; ++i) expect_same(causal[i], plain[i], "causal mask");
}

TEST_P(BackendContract, EmbedInputsEqualTokenInputs) {
  auto tokens = random_tokens(10, 8);
  auto ref = prefill(tokens);
  auto slots = b().embed_slots().allocate(tokens.size());
  std::vector<uint32_t> pos(tokens.size());
  for (uint32_t i = 0; i < pos.size(); ++i) pos[i] = i;
  b().embed_tokens(tokens, pos, slots);
  SequenceInput s = test::prefill_input(tokens, pages(10), kPageSize);
  s.tokens.clear();
  s.embed_slots = slots;
  auto r = b().forward({s});
  for (size_t i = 0; i < tokens.size(); ++i) expect_same(r[0].outputs[i].logits, ref[i], "input");
}

TEST_P(BackendContract, OutputEmbedThenNextDistEqualsTopK) {
  auto tokens = random_tokens(9, 9);
  auto slot = b().embed_slots().allocate(1)[0];
  SequenceInput s = test::prefill_input(tokens, pages(9), kPageSize);
  s.outputs = {
      {8, OutputKind::TopK, 50, 0}, {8, OutputKind::Embed, 0, slot}, {8, OutputKind::Logits, 0, 0}};
  auto r = b().forward({s});
  const auto& topk = r[0].outputs[0].dist;
  ASSERT_EQ(topk.ids.size(), 50u);
  EXPECT_TRUE(r[0].outputs[1].logits.empty() && r[0].outputs[1].dist.ids.empty());
  auto nd = b().next_dist(slot, 50);
  ASSERT_EQ(nd.ids, topk.ids);
  for (size_t i = 0; i < 50; ++i) EXPECT_NEAR(nd.probs[i], topk.probs[i], 1e-6);
  // TopK is the softmax of the logits, sorted by probability, ties by lower id.
  const auto& lg = r[0].outputs[2].logits;
  ASSERT_EQ(lg.size(), b().config().vocab_size);
  const double lse = logsumexp(lg.data(), lg.size());
  double total = 0;
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_NEAR(topk.probs[i], std::exp(lg[topk.ids[i]] - lse), 1e-6);
    total += topk.probs[i];
    if (i) {
      EXPECT_GE(topk.probs[i - 1], topk.probs[i]);
      if (topk.probs[i - 1] == topk.probs[i]) {
        EXPECT_LT(topk.ids[i - 1], topk.ids[i]);
      }
    }
  }
  EXPECT_LE(total, 1.0 + 1e-6);
  EXPECT_EQ(topk.ids[0], std::max_element(lg.begin(), lg.end()) - lg.begin());
  EXPECT_EQ(b().next_dist(slot, 5000).ids.size(), 1000u);  // K clamped to the vocabulary
}

// A fork shares the parent's full pages and copies the partial last page; each side then
// decodes its own token, and each equals a fresh prefill of its own sequence.
TEST_P(BackendContract, ForkOverSharedPagesEqualsOwnPrefill) {
  auto tokens = random_tokens(10, 10);
  auto parent = pages(11);  // 3 pages: 4 + 4 + 2 (+1 decode) slots
  b().forward({test::prefill_input(tokens, parent, kPageSize)});
  auto copy = b().page_slots().allocate(1)[0];
  b().copy_kv(parent[2], copy, 0, 0, 2);
  std::vector<uint32_t> child{parent[0], parent[1], copy};
  auto decode = [&](const std::vector<uint32_t>& p, int32_t token) {
    SequenceInput s = test::prefill_input({token}, p, kPageSize, 10);
    return logits_of(b().forward({s}))[0];
  };
  auto child_out = decode(child, 7);
  auto parent_out = decode(parent, 8);
  auto with = [&](int32_t t) {
    auto all = tokens;
    all.push_back(t);
    return prefill(all)[10];
  };
  expect_same(child_out, with(7), "child");
  expect_same(parent_out, with(8), "parent");
  EXPECT_GT(max_diff(child_out, parent_out), 1e-3f);
}

// Fork by copying a context's KV to new pages at a shifted offset (slot 0 masked).
TEST_P(BackendContract, CopyKvThenContinueEqualsOriginal) {
  auto tokens = random_tokens(14, 10);
  auto src = pages(14);
  b().forward({test::prefill_input({tokens.begin(), tokens.begin() + 10}, src, kPageSize)});
  auto dst = pages(15);
  for (uint32_t s = 0; s < 10; ++s)
    b().copy_kv(src[s / kPageSize], dst[(s + 1) / kPageSize], s % kPageSize, (s + 1) % kPageSize,
                1);
  auto ref =
      b().forward({test::prefill_input({tokens.begin() + 10, tokens.end()}, src, kPageSize, 10)});
  SequenceInput c = test::prefill_input({tokens.begin() + 10, tokens.end()}, dst, kPageSize, 10);
  c.kv_pages.assign(dst.begin(), dst.begin() + test::pages_for(15, kPageSize));
  c.last_page_len = test::last_len(15, kPageSize);
  for (uint32_t i = 0; i < 4; ++i) c.mask.push_back({0, 1, 10 + i + 1, 4 - i - 1});
  auto got = b().forward({c});
  for (size_t i = 0; i < 4; ++i)
    expect_same(got[0].outputs[i].logits, ref[0].outputs[i].logits, "copy");
}

// A forward naming an adapter the backend has not loaded is a bad batch on every backend.
TEST_P(BackendContract, AnAdapterNotLoadedIsABadBatch) {
  auto p = pages(4);
  SequenceInput s = test::prefill_input({1, 2, 3, 4}, p, kPageSize);
  s.adapter = 9;
  EXPECT_THROW(b().forward({s}), Error);
  b().page_slots().free(p);
}

TEST_P(BackendContract, NoOutputsStillWritesKv) {
  auto tokens = random_tokens(8, 11);
  auto ref = prefill(tokens);
  auto p = pages(8);
  SequenceInput s = test::prefill_input({tokens.begin(), tokens.end() - 1}, p, kPageSize);
  s.outputs.clear();
  EXPECT_TRUE(b().forward({s})[0].outputs.empty());
  expect_same(logits_of(b().forward({test::prefill_input({tokens.back()}, p, kPageSize, 7)}))[0],
              ref[7], "decode after a forward without outputs");
}

// bench's hooks: the engine breaks its forwards down per op and leaves the bandwidth and the
// matmul peak of the host to the caller; the fake has none of them (the defaults).
TEST_P(BackendContract, ProfileHooks) {
  ForwardProfile prof;
  const bool cpu = GetParam() == "cpu";
  EXPECT_EQ(b().set_profile(&prof), cpu);
  EXPECT_EQ(b().weight_memory_bandwidth_gb_s(size_t{1} << 20), 0.0);
  EXPECT_EQ(b().matmul_peak_gflop_s(), 0.0);
  auto tokens = random_tokens(6, 3);
  prefill(tokens);
  b().set_profile(nullptr);
  prefill(tokens);
  EXPECT_EQ(prof.forwards, cpu ? 1u : 0u);
  EXPECT_EQ(prof.total_ns() > 0, cpu);
  if (cpu) {
    EXPECT_GT(prof.ns[ForwardProfile::QkvProj], 0);
    EXPECT_GT(prof.ns[ForwardProfile::Output], 0);
  }
}

// ---- the fake's own promises ----

TEST(FakeBackend, NeedsOnlyAConfigAndHasTheEnginesPools) {
  ModelConfig c;
  c.vocab_size = 50;
  c.d_model = 8;
  FakeBackend bare(c, FakeBackendOptions{.page_size = 8, .n_pages = 3, .n_embeds = 2});
  EXPECT_EQ(bare.page_size(), 8u);
  EXPECT_EQ(bare.page_slots().capacity(), 3u);
  EXPECT_EQ(bare.embed_slots().capacity(), 2u);
  EXPECT_EQ(bare.info().name, "fake");
  auto r = bare.forward({test::prefill_input({1, 2, 3}, bare.page_slots().allocate(1), 8)});
  EXPECT_EQ(r[0].outputs[2].logits.size(), 50u);

  const BackendOptions o = small_options();
  Engine engine(test::load_test_model("tiny-f32"), o);
  FakeBackend fake(tiny_config(), o);
  EXPECT_EQ(fake.page_slots().capacity(), engine.page_slots().capacity());
  EXPECT_EQ(fake.embed_slots().capacity(), engine.embed_slots().capacity());
  EXPECT_EQ(fake.config().vocab_size, engine.config().vocab_size);

  BackendOptions tiny_budget = o;
  tiny_budget.kv_memory_bytes = 100;
  std::string engine_error, fake_error;
  try {
    std::make_unique<Engine>(test::load_test_model("tiny-f32"), tiny_budget);
  } catch (const Error& e) {
    engine_error = e.what();
  }
  try {
    std::make_unique<FakeBackend>(tiny_config(), tiny_budget);
  } catch (const Error& e) {
    fake_error = e.what();
  }
  EXPECT_FALSE(fake_error.empty());
  EXPECT_EQ(fake_error, engine_error);
  EXPECT_THROW(FakeBackend(ModelConfig{}, FakeBackendOptions{}), Error);
}

TEST(FakeBackend, MakeBackendBuildsItForDeviceFake) {
  BackendOptions o = small_options();
  o.device = "fake";
  auto weights = std::make_shared<ModelWeights>();  // no tensors at all
  weights->config = tiny_config();
  auto b = make_backend(weights, o);
  EXPECT_EQ(b->info().name, "fake");
  EXPECT_NE(dynamic_cast<FakeBackend*>(b.get()), nullptr);
  EXPECT_FALSE(device_is_cuda("fake"));
}

TEST(FakeBackend, DeterministicAcrossInstancesAndDependsOnlyOnWhatIsVisible) {
  FakeBackend a(tiny_config(), small_options()), b(tiny_config(), small_options());
  auto tokens = random_tokens(12, 20);
  auto pa = a.page_slots().allocate(3);
  auto pb = b.page_slots().allocate(5);
  pb.erase(pb.begin(), pb.begin() + 2);  // other physical pages
  auto ra = a.forward({test::prefill_input(tokens, pa, kPageSize)});
  auto rb = b.forward({test::prefill_input(tokens, pb, kPageSize)});
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_EQ(ra[0].outputs[i].logits, rb[0].outputs[i].logits);
  // Position is part of what an input is: the same tokens one position later differ.
  auto shifted = test::prefill_input(tokens, a.page_slots().allocate(4), kPageSize);
  for (auto& p : shifted.positions) p += 1;
  EXPECT_NE(a.forward({shifted})[0].outputs[11].logits, ra[0].outputs[11].logits);
  // What the KV records.
  EXPECT_EQ(a.kv_entry(pa[1], 2).token, tokens[6]);
  EXPECT_EQ(a.kv_entry(pa[1], 2).position, 6u);
  EXPECT_TRUE(a.kv_entry(pa[1], 2).written);
  EXPECT_FALSE(a.kv_entry(a.page_slots().allocate(1)[0], 0).written);
}

TEST(FakeBackend, ScriptSeesTheVisibleTokensAndDecides) {
  FakeBackend fake(tiny_config(), small_options());
  std::vector<std::vector<int32_t>> seen;
  fake.set_script([&](const FakeView& v) -> std::optional<TokenDistribution> {
    seen.push_back(v.visible_tokens);
    const auto& t = v.visible_tokens;
    if (t.size() >= 2 && t[t.size() - 2] == 10 && t.back() == 11)
      return TokenDistribution{{12, 40}, {0.75f, 0.125f}};
    return std::nullopt;
  });
  auto p = fake.page_slots().allocate(2);
  SequenceInput s = test::prefill_input({5, 10, 11}, p, kPageSize);
  s.outputs = {
      {2, OutputKind::TopK, 3, 0}, {2, OutputKind::Logits, 0, 0}, {1, OutputKind::TopK, 1, 0}};
  auto r = fake.forward({s});
  const TokenDistribution& d = r[0].outputs[0].dist;
  ASSERT_EQ(d.ids.size(), 3u);
  EXPECT_EQ(d.ids[0], 12);
  EXPECT_EQ(d.ids[1], 40);
  EXPECT_NEAR(d.probs[0], 0.75f, 1e-6);
  EXPECT_NEAR(d.probs[1], 0.125f, 1e-6);
  EXPECT_EQ(d.ids[2], 0);  // the left-over mass is even: ties go to the lowest id
  EXPECT_NEAR(d.probs[2], 0.125 / 998, 1e-7);
  const auto& lg = r[0].outputs[1].logits;
  EXPECT_EQ(std::max_element(lg.begin(), lg.end()) - lg.begin(), 12);
  EXPECT_NE(r[0].outputs[2].dist.ids[0], 12);  // input 1 sees {5, 10}: the default
  EXPECT_EQ(seen[0], (std::vector<int32_t>{5, 10, 11}));
  // A mask decides what the script sees.
  seen.clear();
  SequenceInput m = test::prefill_input({5, 10, 11}, fake.page_slots().allocate(1), kPageSize);
  m.outputs = {{2, OutputKind::TopK, 1, 0}};
  m.mask = {{1, 2}, {2, 1}, {0, 1, 2}};
  EXPECT_EQ(fake.forward({m})[0].outputs[0].dist.ids[0], 12);
  EXPECT_EQ(seen.back(), (std::vector<int32_t>{10, 11}));
  m.mask[2] = {1, 1, 1};
  EXPECT_NE(fake.forward({m})[0].outputs[0].dist.ids[0], 12);
  EXPECT_EQ(seen.back(), (std::vector<int32_t>{5, 11}));
  // A script's mistakes are errors that say what was wrong.
  fake.set_script([](const FakeView&) -> std::optional<TokenDistribution> {
    return TokenDistribution{{3, 3}, {0.5f, 0.5f}};
  });
  try {
    fake.forward({s});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "fake backend: script lists token 3 twice");
  }
  fake.set_script([](const FakeView&) { return std::optional(FakeBackend::certainly(7)); });
  EXPECT_EQ(fake.next_dist(fake.embed_slots().allocate(1)[0], 1).ids[0], 7);
}

TEST(FakeBackend, ScriptContinuationAnswersAfterThePrompt) {
  FakeBackend fake(tiny_config(), small_options());
  fake.set_script(script_continuation({1, 2, 3}, {7, 8, 9}));
  auto p = fake.page_slots().allocate(2);
  std::vector<int32_t> input{5, 1, 2, 3}, got;
  std::vector<float> top_probs;
  uint32_t filled = 0;
  while (got.size() < 4) {
    SequenceInput s = test::prefill_input(input, p, kPageSize, filled);
    filled += uint32_t(input.size());
    s.outputs = {{uint32_t(input.size() - 1), OutputKind::TopK, 1, 0}};
    const TokenDistribution d = fake.forward({s})[0].outputs[0].dist;
    got.push_back(d.ids[0]);
    top_probs.push_back(d.probs[0]);
    input = {d.ids[0]};
  }
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 3), (std::vector<int32_t>{7, 8, 9}));
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(top_probs[i], 1.0f, 1e-6);
  EXPECT_LT(top_probs[3], 0.5f);  // past the answer: the default distribution
}

TEST(FakeBackend, EmbedsHoldDeterministicVectors) {
  FakeBackend fake(tiny_config(), small_options());
  auto slots = fake.embed_slots().allocate(3);
  fake.embed_tokens(std::vector<int32_t>{5, 5, 6}, std::vector<uint32_t>{0, 9, 0}, slots);
  EXPECT_EQ(fake.embed_entry(slots[0]).token, 5);
  EXPECT_EQ(fake.embed_vector(slots[0]).size(), fake.config().d_model);
  EXPECT_EQ(fake.embed_vector(slots[0]), fake.embed_vector(slots[1]));  // a token's row
  EXPECT_NE(fake.embed_vector(slots[0]), fake.embed_vector(slots[2]));
  // An output Embed holds a hidden state: no token, a vector of its own.
  SequenceInput s = test::prefill_input({5, 6}, fake.page_slots().allocate(1), kPageSize);
  s.outputs = {{1, OutputKind::Embed, 0, slots[1]}};
  fake.forward({s});
  EXPECT_EQ(fake.embed_entry(slots[1]).token, -1);
  EXPECT_EQ(fake.embed_entry(slots[1]).position, 1u);
  EXPECT_NE(fake.embed_vector(slots[1]), fake.embed_vector(slots[0]));
}

TEST(FakeBackend, CopyKvOverlappingRangesBehaveLikeMemmove) {
  FakeBackend fake(tiny_config(), small_options());
  auto p = fake.page_slots().allocate(2);
  fake.forward({test::prefill_input({1, 2, 3, 4, 5, 6, 7}, p, kPageSize)});
  fake.copy_kv(p[0], p[0], 0, 1, 3);  // 1 2 3 4 -> 1 1 2 3
  std::vector<int32_t> got;
  for (uint32_t s = 0; s < 4; ++s) got.push_back(fake.kv_entry(p[0], s).token);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 1, 2, 3}));
  fake.copy_kv(p[1], p[0], 1, 0, 2);  // 6 7 -> slots 0, 1
  EXPECT_EQ(fake.kv_entry(p[0], 0).token, 6);
  EXPECT_EQ(fake.kv_entry(p[0], 1).position, 6u);
}

// Every bad batch and handler argument fails on the fake with the engine's exact message, and
// writes nothing.
TEST(FakeBackend, ValidationErrorsMatchTheEngine) {
  Engine engine(test::load_test_model("tiny-f32"), small_options());
  FakeBackend fake(tiny_config(), small_options());
  std::vector<Backend*> backends{&engine, &fake};
  for (Backend* b : backends) {  // the same ids on both: fresh pools hand them out in order
    b->page_slots().allocate(4);
    b->embed_slots().allocate(1);
  }
  const std::vector<uint32_t> good_pages{0, 1}, bad_pages{2, 3};
  SequenceInput good = test::prefill_input(random_tokens(6, 13), good_pages, kPageSize);
  auto base = [&] { return test::prefill_input(random_tokens(6, 14), bad_pages, kPageSize); };
  std::vector<SequenceInput> bad;
  {
    auto s = base();
    s.kv_pages[1] = 100000;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.kv_pages[1] = 50;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.kv_pages.resize(1);
    bad.push_back(s);
  }
  {
    auto s = base();
    s.last_page_len = 0;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.last_page_len = kPageSize + 1;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.positions.pop_back();
    bad.push_back(s);
  }
  {
    auto s = base();
    s.tokens[2] = 1000;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.tokens[2] = -1;
    bad.push_back(s);
  }
  {
    auto s = base();
    s.embed_slots = {0, 1, 2, 3, 4, 5};
    bad.push_back(s);
  }
  {
    auto s = base();
    s.tokens.clear();
    s.embed_slots = {0, 1, 2, 3, 4, 5};
    bad.push_back(s);
  }
  {
    auto s = base();
    s.tokens.clear();
    s.positions.clear();
    s.outputs.clear();
    bad.push_back(s);
  }
  {
    auto s = base();
    s.kv_pages.clear();
    bad.push_back(s);
  }
  {
    auto s = base();
    s.mask.assign(6, {1, 4});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.mask.assign(5, {6});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.mask.assign(6, {0, 6});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.outputs.push_back({6, OutputKind::Logits, 0, 0});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.outputs.push_back({0, OutputKind::TopK, 0, 0});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.outputs.push_back({0, OutputKind::Embed, 0, 7});
    bad.push_back(s);
  }
  {
    auto s = base();
    s.kv_pages = good_pages;
    bad.push_back(s);
  }
  // Token masks and logit adjustments: the wrong size, on a full-logits output, out of order,
  // outside the vocabulary, non-finite, a repetition penalty that does not divide.
  const uint32_t vocab = tiny_config().vocab_size;
  auto with_output = [&](OutputSpec o) {
    auto s = base();
    s.outputs.push_back(std::move(o));
    bad.push_back(s);
  };
  with_output({5, OutputKind::TopK, 4, 0, std::make_shared<TokenMask>(1, ~uint64_t{0})});
  with_output(
      {5, OutputKind::Logits, 0, 0, std::make_shared<TokenMask>((vocab + 63) / 64, ~uint64_t{0})});
  auto adjusted = [&](LogitAdjustments a, OutputKind kind = OutputKind::TopK) {
    with_output({5, kind, kind == OutputKind::TopK ? 4u : 0u, 0, nullptr,
                 std::make_shared<const LogitAdjustments>(std::move(a))});
  };
  adjusted({{3, 1, 1, 0}}, OutputKind::Logits);
  adjusted({{9, 1, 1, 0}, {8, 1, 1, 0}});
  adjusted({{9, 1, 1, 0}, {9, 1, 1, 0}});
  adjusted({{vocab, 1, 1, 0}});
  adjusted({{3, NAN, 1, 0}});
  adjusted({{3, 0, 1, INFINITY}});
  adjusted({{3, 0, 0, 0}});
  auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::vector<SequenceInput> batch{good, bad[i]};
    const std::string want = message([&] { engine.forward(batch); });
    EXPECT_NE(want, "<no error>") << "case " << i;
    EXPECT_EQ(message([&] { fake.forward(batch); }), want) << "case " << i;
  }
  for (uint32_t s = 0; s < kPageSize; ++s) EXPECT_FALSE(fake.kv_entry(good_pages[0], s).written);
  for (Backend* b : backends) b->page_slots().free(std::vector<uint32_t>{3});
  const std::vector<std::function<void(Backend&)>> calls = {
      [](Backend& b) { b.next_dist(3, 10); },
      [](Backend& b) { b.next_dist(0, 0); },
      [](Backend& b) {
        b.embed_tokens(std::vector<int32_t>{5}, std::vector<uint32_t>{0}, std::vector<uint32_t>{9});
      },
      [](Backend& b) {
        b.embed_tokens(std::vector<int32_t>{5000}, std::vector<uint32_t>{0},
                       std::vector<uint32_t>{0});
      },
      [](Backend& b) { b.embed_tokens(std::vector<int32_t>{5}, {}, std::vector<uint32_t>{0}); },
      [](Backend& b) { b.copy_kv(0, 3, 0, 0, 1); },
      [](Backend& b) { b.copy_kv(0, 1, 2, 0, 3); },
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string want = message([&] { calls[i](engine); });
    EXPECT_NE(want, "<no error>") << "call " << i;
    EXPECT_EQ(message([&] { calls[i](fake); }), want) << "call " << i;
  }
  EXPECT_EQ(fake.counters().rejected, bad.size() + calls.size());
  EXPECT_EQ(fake.forward({good})[0].outputs.size(), 6u);
}

TEST(FakeBackend, DelayFailureInjectionAndCounters) {
  using namespace std::chrono;
  FakeBackend fake(tiny_config(), small_options());
  auto p = fake.page_slots().allocate(4);
  auto in = [&](std::vector<int32_t> t, uint32_t page) {
    return test::prefill_input(t, {p[page]}, kPageSize);
  };
  fake.set_forward_delay(milliseconds(20), milliseconds(5));
  const auto start = steady_clock::now();
  fake.forward({in({1, 2}, 0), in({3}, 1)});
  EXPECT_GE(steady_clock::now() - start, milliseconds(35));
  fake.set_forward_delay({});

  fake.fail_call(FakeHandler::Forward, 2);
  fake.forward({in({4}, 2)});
  try {
    fake.forward({in({5}, 3)});
    ADD_FAILURE() << "no injected failure";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "fake backend: injected failure of this forward call");
  }
  EXPECT_FALSE(fake.kv_entry(p[3], 0).written) << "a failed call changes nothing";
  fake.forward({in({5}, 3)});  // one-shot
  EXPECT_EQ(fake.kv_entry(p[3], 0).token, 5);
  fake.fail_call(FakeHandler::NextDist, 1, FakeFailure::OutOfMemory);
  const uint32_t slot = fake.embed_slots().allocate(1)[0];
  EXPECT_THROW(fake.next_dist(slot, 1), std::bad_alloc);
  EXPECT_EQ(fake.next_dist(slot, 1).ids.size(), 1u);

  const FakeCounters c = fake.counters();
  EXPECT_EQ(c.forward_calls, 4u);
  EXPECT_EQ(c.batches, 3u);
  EXPECT_EQ(c.sequences, 4u);
  EXPECT_EQ(c.tokens, 5u);
  EXPECT_EQ(c.outputs, 5u);
  EXPECT_EQ(c.max_batch_sequences, 2u);
  EXPECT_EQ(c.max_batch_tokens, 3u);
  EXPECT_EQ(c.next_dist_calls, 2u);
  EXPECT_EQ(c.injected_failures, 2u);
  EXPECT_EQ(c.rejected, 0u);
}

// --cuda-attention's names: each parses back to itself; anything else is refused naming the
// option and the accepted values (what every CLI command and the TOML config report).
TEST(BackendOptions, CudaAttentionNames) {
  for (CudaAttention a : {CudaAttention::Auto, CudaAttention::FlashInfer, CudaAttention::Pith})
    EXPECT_EQ(parse_cuda_attention(cuda_attention_name(a)), a);
  EXPECT_EQ(BackendOptions{}.cuda_attention, CudaAttention::Auto);
  try {
    parse_cuda_attention("FlashInfer");
    FAIL() << "a wrongly cased name was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--cuda-attention: 'FlashInfer' is not one of auto, flashinfer, pith");
  }
}

}  // namespace
}  // namespace pith
