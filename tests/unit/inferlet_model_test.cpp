// End to end through all three layers, in process: a real inferlet (inferlets/greedy_abi,
// C++ compiled to wasm32 and run by the runtime) drives the real engine on the tiny test model
// through the control layer. Its greedy output must equal a greedy loop run directly on the
// engine, alone and with many instances batched together.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "built_inferlet.h"
#include "control/controller.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "runtime/control_model_api.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

namespace pith {
namespace {

using namespace std::chrono_literals;
const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
const std::string kInferlet = std::string(PITH_INFERLET_DIR) + "/greedy_abi.wasm";
const std::string kTextCompletion = std::string(PITH_INFERLET_DIR) + "/text_completion.wasm";

// Greedy decoding straight on the engine: the reference.
std::vector<int32_t> engine_greedy(Engine& engine, std::vector<int32_t> prompt, int n) {
  const uint32_t ps = engine.kv_pool().page_size();
  auto pages = engine.kv_pool().allocate((prompt.size() + n + ps - 1) / ps);
  std::vector<int32_t> out;
  uint32_t filled = 0;
  std::vector<int32_t> input = prompt;
  for (int step = 0; step < n; ++step) {
    SequenceInput s;
    s.tokens = input;
    for (size_t i = 0; i < input.size(); ++i)
      s.positions.push_back(filled + static_cast<uint32_t>(i));
    uint32_t total = filled + static_cast<uint32_t>(input.size());
    size_t used = (total + ps - 1) / ps;
    s.kv_pages.assign(pages.begin(), pages.begin() + used);
    s.last_page_len = total - static_cast<uint32_t>(used - 1) * ps;
    s.outputs.push_back({static_cast<uint32_t>(input.size() - 1), OutputKind::TopK, 1, 0});
    auto r = engine.forward({s});
    int32_t next = r[0].outputs[0].dist.ids[0];
    out.push_back(next);
    filled = total;
    input = {next};
  }
  engine.kv_pool().free(pages);
  return out;
}

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::vector<std::string>> messages, logs;
  runtime::EventSink sink() {
    return [this](uint64_t id, const runtime::InstanceEvent& e) {
      std::lock_guard lock(mu);
      if (e.kind == runtime::InstanceEvent::Kind::Message) messages[id].push_back(e.text);
      if (e.kind == runtime::InstanceEvent::Kind::Log) logs[id].push_back(e.text);
      cv.notify_all();
    };
  }
};

std::string csv(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(',');
    s.append(std::to_string(v[i]));
  }
  return s;
}

class InferletModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(inferlet_built(kInferlet));
    weights_ = load_model(kModel, LoadOptions{.quiet = true});
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(kModel));
    EngineOptions eo;
    eo.kv_memory_bytes = 4 << 20;
    eo.n_threads = 2;
    engine_ = std::make_unique<Engine>(weights_, eo);
  }
  std::shared_ptr<const ModelWeights> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(InferletModelTest, GreedyInferletMatchesEngineGreedy) {
  const std::vector<int32_t> prompt{1, 306, 763, 278, 2217, 310, 278, 3186};
  std::vector<int32_t> p2;
  for (int32_t t : prompt) p2.push_back(t % 1000);
  const int n = 12;
  auto want = engine_greedy(*engine_, p2, n);

  ControllerOptions co;
  Controller ctl(*engine_, co);
  runtime::ControlModelApi api(ctl, *tokenizer_, "tiny-f32");
  runtime::RuntimeConfig rc;
  rc.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  rc.model = &api;
  runtime::Runtime rt(rc);
  Collected got;
  auto inst =
      rt.launch(rt.load_program_file(kInferlet),
                {"greedy_abi", "--tokens", csv(p2), "--max-tokens", std::to_string(n)}, got.sink());
  auto st = inst->wait();
  ASSERT_EQ(st.reason, "exited with code 0");
  auto& msgs = got.messages[inst->id()];
  ASSERT_EQ(msgs.size(), size_t(n + 1)) << (msgs.empty() ? "" : msgs[0]);
  EXPECT_EQ(msgs.back(), "done");
  for (int i = 0; i < n; ++i) EXPECT_EQ(msgs[i], std::to_string(want[i])) << "token " << i;
  EXPECT_EQ(ctl.gauges().pages_free, ctl.gauges().pages_total);  // everything released
}

TEST_F(InferletModelTest, ManyInstancesAreBatchedAndEachMatchesItsOwnReference) {
  const int kInstances = 16, n = 8;
  std::vector<std::vector<int32_t>> prompts, want;
  for (int i = 0; i < kInstances; ++i) {
    prompts.push_back({1, 100 + i * 7, 200 + i, 300 + 2 * i, 5 + i});
    want.push_back(engine_greedy(*engine_, prompts.back(), n));
  }
  Controller ctl(*engine_, {});
  std::atomic<uint32_t> biggest{0};
  ctl.set_batch_observer([&](const BatchStats& s) {
    if (s.calls > biggest) biggest = s.calls;
  });
  runtime::ControlModelApi api(ctl, *tokenizer_, "tiny-f32");
  runtime::RuntimeConfig rc;
  rc.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  rc.model = &api;
  runtime::Runtime rt(rc);
  auto prog = rt.load_program_file(kInferlet);
  Collected got;
  std::vector<std::shared_ptr<runtime::Instance>> insts;
  for (int i = 0; i < kInstances; ++i)
    insts.push_back(rt.launch(
        prog, {"greedy_abi", "--tokens", csv(prompts[i]), "--max-tokens", std::to_string(n)},
        got.sink()));
  for (int i = 0; i < kInstances; ++i) {
    ASSERT_EQ(insts[i]->wait().reason, "exited with code 0");
    auto& msgs = got.messages[insts[i]->id()];
    ASSERT_EQ(msgs.size(), size_t(n + 1));
    for (int t = 0; t < n; ++t) EXPECT_EQ(msgs[t], std::to_string(want[i][t])) << "instance " << i;
  }
  EXPECT_GT(biggest.load(), 1u) << "forward calls of different inferlets were never batched";
}

TEST_F(InferletModelTest, SdkTextCompletionMatchesEngineGreedyAndReusesThePrefixCache) {
  ASSERT_TRUE(inferlet_built(kTextCompletion));
  // A prompt longer than two KV pages, so the prefix cache has full pages to share.
  const std::string prompt =
      "The quick brown fox jumps over the lazy dog while the cat watches from the window.";
  auto ids = tokenizer_->encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  ASSERT_GT(ids.size(), 32u);
  const int n = 10;
  auto want = engine_greedy(*engine_, ids, n);
  std::string want_csv = csv(want);

  Controller ctl(*engine_, {});
  runtime::ControlModelApi api(ctl, *tokenizer_, "tiny-f32");
  runtime::RuntimeConfig rc;
  rc.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  rc.model = &api;
  runtime::Runtime rt(rc);
  auto prog = rt.load_program_file(kTextCompletion);
  Collected got;
  std::vector<std::string> computed;
  for (int run = 0; run < 2; ++run) {
    auto inst = rt.launch(
        prog,
        {"text_completion", "--prompt", prompt, "--max-tokens", std::to_string(n), "--tokens"},
        got.sink());
    ASSERT_EQ(inst->wait().reason, "exited with code 0");
    std::lock_guard lock(got.mu);
    auto& msgs = got.messages[inst->id()];
    ASSERT_EQ(msgs.size(), 2u) << (msgs.empty() ? "" : msgs[0]);
    EXPECT_EQ(msgs[1], want_csv) << "run " << run;  // greedy == engine greedy, cache or not
    EXPECT_EQ(msgs[0], tokenizer_->decode(want));
    for (auto& l : got.logs[inst->id()])
      if (l.find("prompt tokens computed") != std::string::npos) computed.push_back(l);
  }
  // The second run found the first one's full pages in the prefix cache.
  const size_t full = ids.size() / 16 * 16;
  EXPECT_EQ(ctl.gauges().prefix_hit_tokens, full);
  ASSERT_EQ(computed.size(), 2u);
  EXPECT_NE(computed[0].find("computed: " + std::to_string(ids.size())), std::string::npos)
      << computed[0];
  EXPECT_NE(computed[1].find("computed: " + std::to_string(ids.size() - full)), std::string::npos)
      << computed[1];
}

}  // namespace
}  // namespace pith
