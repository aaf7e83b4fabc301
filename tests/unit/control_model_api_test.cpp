// The runtime's ModelApi over the control layer, on the weightless FakeBackend: a call the
// control layer rejects, or that fails in the backend, returns its ABI code to the guest and
// writes its reason to the instance's log, both straight from a session and through a real
// inferlet's log stream.
#include "runtime/control_model_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>

#include "engine/fake_backend.h"
#include "runtime/runtime.h"

namespace pith::runtime {
namespace {

using namespace std::chrono_literals;

const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(kModel);
  return t;
}

std::unique_ptr<FakeBackend> fake_backend() {
  ModelConfig c;
  c.vocab_size = static_cast<uint32_t>(tokenizer().vocab_size());
  c.d_model = 64;
  return std::make_unique<FakeBackend>(c, FakeBackendOptions{16, 8, 16});
}

// Lines the session wrote to the instance log.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  ErrorLog fn() {
    return [this](std::string m) {
      std::lock_guard lock(mu);
      lines.push_back(std::move(m));
      cv.notify_all();
    };
  }
  bool has(const std::string& s, std::chrono::milliseconds timeout = 0ms) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] {
      for (const auto& l : lines)
        if (l.find(s) != std::string::npos) return true;
      return false;
    });
  }
};

// Traits name the capabilities, then what the model is (from its ModelConfig).
TEST(ControlModelApi, TraitsDescribeTheModelFamily) {
  ModelConfig c;
  c.vocab_size = static_cast<uint32_t>(tokenizer().vocab_size());
  c.d_model = 64;
  c.architecture = "gemma2";
  c.sliding_window = 4096;
  c.final_softcap = 30;
  FakeBackend backend(c, FakeBackendOptions{16, 8, 16});
  Controller ctl(backend, {});
  ControlModelApi api(ctl, tokenizer(), "tiny");
  auto session = api.open_session(1);
  uint32_t model = 0;
  ASSERT_EQ(session->open_model("", &model), PITH_OK);
  std::vector<std::string> traits;
  ASSERT_EQ(session->model_traits(model, &traits), PITH_OK);
  auto has = [&](const std::string& t) {
    return std::find(traits.begin(), traits.end(), t) != traits.end();
  };
  EXPECT_TRUE(has("forward"));
  EXPECT_TRUE(has("architecture=gemma2"));
  EXPECT_TRUE(has("sliding_window=4096"));
  EXPECT_TRUE(has("logit_softcap"));
  EXPECT_FALSE(has("experts=2/8"));

  auto llama_backend = fake_backend();
  Controller ctl2(*llama_backend, {});
  ControlModelApi api2(ctl2, tokenizer(), "tiny");
  auto s2 = api2.open_session(2);
  ASSERT_EQ(s2->open_model("", &model), PITH_OK);
  ASSERT_EQ(s2->model_traits(model, &traits), PITH_OK);
  EXPECT_TRUE(has("architecture=llama"));
  EXPECT_TRUE(has("eos_tokens=" + std::to_string(tokenizer().eos_id())));
  EXPECT_FALSE(has("logit_softcap"));
  for (const auto& t : traits) EXPECT_FALSE(t.starts_with("sliding_window")) << t;
}

// The vocabulary trie is the tokenizer's (special tokens left out), built once per model and
// shared by every session.
TEST(ControlModelApi, VocabularyTrieIsBuiltOnceAndLeavesSpecialTokensOut) {
  auto backend = fake_backend();
  Controller ctl(*backend, {});
  ControlModelApi api(ctl, tokenizer(), "tiny");
  auto s1 = api.open_session(1);
  auto s2 = api.open_session(2);
  uint32_t model = 0;
  ASSERT_EQ(s1->open_model("", &model), PITH_OK);
  std::shared_ptr<const TokenTrie> a, b;
  ASSERT_EQ(s1->vocab_trie(model, &a), PITH_OK);
  ASSERT_EQ(s2->vocab_trie(model, &b), PITH_OK);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(s1->vocab_trie(model + 7, &b), PITH_ERR_BAD_HANDLE);
  const Tokenizer& tok = tokenizer();
  ASSERT_EQ(a->vocab_size(), tok.vocab_size());
  size_t special = 0;
  for (uint32_t id = 0; id < a->vocab_size(); ++id) {
    const auto i = static_cast<int32_t>(id);
    EXPECT_EQ(a->bytes(id), tok.token_bytes(i));
    EXPECT_EQ(a->usable(id), !tok.is_special(i) && !tok.token_bytes(i).empty()) << id;
    special += tok.is_special(i);
  }
  EXPECT_GT(special, 0u);
  // Every usable token is found by walking its bytes.
  for (uint32_t id = 0; id < a->vocab_size(); ++id)
    if (a->usable(id)) {
      const int32_t t = a->longest_prefix(a->bytes(id));
      ASSERT_GE(t, 0);
      EXPECT_EQ(a->bytes(static_cast<uint32_t>(t)), a->bytes(id));
    }
}

// A session on the fake backend with a queue and one KV page; its log lines in `log`.
class SessionWithAPage : public ::testing::Test {
 protected:
  void SetUp() override {
    session->set_error_log(log.fn());
    uint32_t model = 0;
    ASSERT_EQ(session->open_model("", &model), PITH_OK);
    ASSERT_EQ(session->create_queue(model, &queue), PITH_OK);
    ASSERT_EQ(session->alloc_kvpages(queue, 1, &pages), PITH_OK);
  }
  std::unique_ptr<FakeBackend> backend = fake_backend();
  Controller ctl{*backend, {}};
  ControlModelApi api{ctl, tokenizer(), "tiny"};
  std::unique_ptr<ModelSession> session = api.open_session(1);
  Log log;
  uint32_t queue = 0;
  std::vector<uint32_t> pages;

  // One forward_tokens through the session, waited for: each output's (ids, probabilities).
  struct Dist {
    std::vector<uint32_t> ids;
    std::vector<float> probs;
  };
  std::vector<Dist> forward(const ForwardTokensArgs& a) {
    std::promise<std::pair<pith_status_t, std::string>> got;
    EXPECT_EQ(session->forward_tokens(queue, a,
                                      [&](pith_status_t st, std::string b) {
                                        got.set_value({st, b});
                                      }),
              PITH_OK);
    auto [st, bytes] = got.get_future().get();
    EXPECT_EQ(st, PITH_OK);
    std::vector<Dist> out;
    for (size_t at = 0; at + 4 <= bytes.size();) {
      uint32_t k;
      std::memcpy(&k, bytes.data() + at, 4);
      out.push_back({std::vector<uint32_t>(k), std::vector<float>(k)});
      std::memcpy(out.back().ids.data(), bytes.data() + at + 4, size_t{k} * 4);
      std::memcpy(out.back().probs.data(), bytes.data() + at + 4 + size_t{k} * 4, size_t{k} * 4);
      at += 4 + size_t{k} * 8;
    }
    return out;
  }
};

TEST_F(SessionWithAPage, RejectedCallsLogWhyAndReturnTheCode) {
  // Three inputs cannot fit a context of two slots: the controller's reason reaches the log.
  ForwardTokensArgs args;
  args.tokens = {1, 2, 3};
  args.positions = {0, 1, 2};
  args.kv_pages = pages;
  args.last_page_len = 2;
  args.output_indices = {2};
  EXPECT_EQ(session->forward_tokens(queue, args, [](pith_status_t, std::string) {}),
            PITH_ERR_BAD_ARGUMENT);
  EXPECT_TRUE(log.has("forward_tokens: 3 inputs do not fit a context of 2 slots (bad argument)"));

  // A page handle the instance does not own.
  EXPECT_EQ(session->dealloc_kvpages(queue, std::vector<uint32_t>{42}), PITH_ERR_BAD_HANDLE);
  EXPECT_TRUE(log.has("dealloc_kvpages: page handle 42"));

  // A fire-and-forget command that fails in the backend: logged when it fails, and its code is
  // what the queue's next future reports.
  backend->fail_call(FakeHandler::CopyKv, 1, FakeFailure::OutOfMemory);
  ASSERT_EQ(session->copy_kvpage(queue, pages[0], pages[0], 0, 1, 1), PITH_OK);
  std::promise<pith_status_t> synced;
  ASSERT_EQ(session->synchronize(queue, [&](pith_status_t s, std::string) { synced.set_value(s); }),
            PITH_OK);
  EXPECT_EQ(synced.get_future().get(), PITH_ERR_BACKEND);
  EXPECT_TRUE(log.has("copy_kvpage: backend out of memory", 5s));
}

// forward_tokens_allowed: each output's top-K holds only its mask's tokens (fewer entries when
// fewer are allowed); masks of the wrong size, or on a whole-vocabulary call, are rejected.
TEST_F(SessionWithAPage, TokenMasksRestrictEachOutputsTopK) {
  const size_t vocab = tokenizer().vocab_size(), words = (vocab + 63) / 64;

  ForwardTokensArgs args;
  args.tokens = {1, 2, 3};
  args.positions = {0, 1, 2};
  args.kv_pages = pages;
  args.last_page_len = 3;
  args.output_indices = {1, 2};
  args.top_k = 8;
  args.allowed.assign(2 * words, 0);
  const std::vector<uint32_t> first = {3, 70, 71, 200, 201, 202, 203, 204, 205, 206};
  for (uint32_t t : first) args.allowed[t / 64] |= uint64_t{1} << (t % 64);
  args.allowed[words + 5 / 64] |= uint64_t{1} << 5;  // the second output: token 5 only
  const auto dists = forward(args);
  ASSERT_EQ(dists.size(), 2u);
  EXPECT_EQ(dists[0].ids.size(), 8u);
  for (uint32_t t : dists[0].ids)
    EXPECT_NE(std::find(first.begin(), first.end(), t), first.end()) << t << " is not allowed";
  EXPECT_EQ(dists[1].ids, std::vector<uint32_t>{5});

  auto rejected = [&](const ForwardTokensArgs& a) {
    return session->forward_tokens(queue, a, [](pith_status_t, std::string) {});
  };
  ForwardTokensArgs short_mask = args;
  short_mask.allowed.pop_back();
  EXPECT_EQ(rejected(short_mask), PITH_ERR_BAD_ARGUMENT);
  EXPECT_TRUE(
      log.has(fmt::format("forward_tokens: {} mask words; 2 outputs over a vocabulary of "
                          "{} need {}",
                          2 * words - 1, vocab, 2 * words)));
  ForwardTokensArgs whole = args;
  whole.top_k = PITH_TOP_K_ALL;
  EXPECT_EQ(rejected(whole), PITH_ERR_BAD_ARGUMENT);
  EXPECT_TRUE(log.has("token masks need an ordinary top_k"));
}

// forward_tokens_adjusted: each output's top-K ranks its adjusted logits (a +100 bias comes
// first, a banned token goes last), probabilities are the adjusted softmax; bad lists are refused
// with the reason.
TEST_F(SessionWithAPage, LogitAdjustmentsShapeEachOutputsTopK) {
  const uint32_t vocab = static_cast<uint32_t>(tokenizer().vocab_size());
  ForwardTokensArgs args;
  args.tokens = {1, 2, 3};
  args.positions = {0, 1, 2};
  args.kv_pages = pages;
  args.last_page_len = 3;
  args.output_indices = {1, 2};
  args.top_k = 4;
  const auto plain = forward(args);
  ASSERT_EQ(plain.size(), 2u);
  const uint32_t top = plain[0].ids[0], boost = vocab - 1;
  ASSERT_NE(top, boost);
  // Output 0: its best token banned, the vocabulary's last one boosted; output 1: untouched.
  args.adjust = {{0, top, 0, 1, PITH_LOGIT_BAN}, {0, boost, 100, 1, 0}};
  const auto adjusted = forward(args);
  ASSERT_EQ(adjusted.size(), 2u);
  EXPECT_EQ(adjusted[0].ids[0], boost);
  EXPECT_GT(adjusted[0].probs[0], 0.999f);  // the adjusted softmax: +100 takes the mass
  EXPECT_EQ(std::find(adjusted[0].ids.begin(), adjusted[0].ids.end(), top), adjusted[0].ids.end());
  EXPECT_EQ(adjusted[1].ids, plain[1].ids);
  EXPECT_EQ(adjusted[1].probs, plain[1].probs);

  auto rejected = [&](std::vector<pith_logit_adjust_t> list, uint32_t top_k, const char* why) {
    ForwardTokensArgs a = args;
    a.adjust = std::move(list);
    a.top_k = top_k;
    EXPECT_EQ(session->forward_tokens(queue, a, [](pith_status_t, std::string) {}),
              PITH_ERR_BAD_ARGUMENT)
        << why;
    EXPECT_TRUE(log.has(why)) << why;
  };
  rejected({{0, 9, 1, 1, 0}, {0, 8, 1, 1, 0}}, 4, "must be sorted by token, each once (8 after 9)");
  rejected({{0, 9, 1, 1, 0}, {0, 9, 1, 1, 0}}, 4, "must be sorted by token, each once (9 after 9)");
  rejected({{1, 9, 1, 1, 0}, {0, 8, 1, 1, 0}}, 4, "must be sorted by output (0 after 1)");
  rejected({{2, 9, 1, 1, 0}}, 4, "logit adjustment 0 is for output 2 of 2");
  rejected({{0, vocab, 1, 1, 0}}, 4,
           fmt::format("token {} outside the vocabulary of {}", vocab, vocab).c_str());
  rejected({{0, 9, NAN, 1, 0}}, 4, "values must be finite and repetition above 0");
  rejected({{0, 9, 0, 0, 0}}, 4, "values must be finite and repetition above 0");
  rejected({{0, 9, 0, 1, 0}}, PITH_TOP_K_LOGITS, "logit adjustments need an ordinary top_k");
}

TEST(ControlModelApi, AnInferletsRejectedCallReachesItsLogStream) {
  const std::string kv_alloc = std::string(PITH_INFERLET_DIR) + "/kv_alloc.wasm";
  if (!std::filesystem::exists(kv_alloc)) GTEST_SKIP() << "inferlets not built (clang-14 missing)";
  auto backend = fake_backend();
  ControllerOptions opt;
  opt.max_kv_pages_per_instance = 3;
  Controller ctl(*backend, opt);
  ControlModelApi api(ctl, tokenizer(), "tiny");
  RuntimeConfig rc;
  rc.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  rc.tiers = TierPolicy::InterpreterOnly;
  rc.model = &api;
  Runtime rt(rc);

  std::mutex mu;
  std::vector<std::string> messages, logs;
  auto inst = rt.launch(rt.load_program_file(kv_alloc), {"kv_alloc", "5"},
                        [&](uint64_t, const InstanceEvent& e) {
                          std::lock_guard lock(mu);
                          if (e.kind == InstanceEvent::Kind::Message) messages.push_back(e.text);
                          if (e.kind == InstanceEvent::Kind::Log) logs.push_back(e.text);
                        });
  inst->close_input();
  inst->wait();
  std::lock_guard lock(mu);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0], "error: out of KV pages");  // the guest sees the ABI code only
  bool logged = false;
  for (const auto& l : logs)
    logged |= l ==
              "alloc_kvpages: 5 pages requested while holding 0, quota 3 "
              "(KV page quota exceeded)";
  EXPECT_TRUE(logged) << "logs: " << ::testing::PrintToString(logs);
}

}  // namespace
}  // namespace pith::runtime
