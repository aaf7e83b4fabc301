// The model-facing half of the ABI, end to end without a model: a fake ModelApi records what the
// runtime decoded from guest memory, answers from its own tables (including a future completed
// from another thread), and checks that the per-instance session is released at exit. The
// `modelcalls` inferlet reports every step back as a message. Then the real bridge
// (ControlModelApi over the controller) on the weightless FakeBackend: the SDK's completion loop
// decodes a scripted answer. Runs on both tiers.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "built_inferlet.h"
#include "control/controller.h"
#include "engine/fake_backend.h"
#include "engine/gguf_loader.h"
#include "formats/gguf.h"
#include "runtime/control_model_api.h"
#include "runtime/model_api.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

namespace pith::runtime {
namespace {

namespace fs = std::filesystem;

struct FakeCounters {
  std::atomic<int> sessions_opened{0}, sessions_closed{0};
  std::atomic<int> pages_left_at_close{-1};
  std::mutex mu;
  std::vector<std::thread> completers;  // joined by FakeModel's destructor
};

class FakeSession final : public ModelSession {
 public:
  explicit FakeSession(FakeCounters& c) : c_(c) { c_.sessions_opened++; }
  ~FakeSession() override {
    c_.pages_left_at_close = static_cast<int>(pages_.size());
    c_.sessions_closed++;
  }
  pith_status_t open_model(std::string_view name, uint32_t* model) override {
    if (name != "fake-a" && name != "fake-b") return PITH_ERR_NOT_FOUND;
    *model = name == "fake-a" ? 1 : 2;
    return PITH_OK;
  }
  pith_status_t model_traits(uint32_t, std::vector<std::string>* t) override {
    *t = {"tokenize", "forward"};
    return PITH_OK;
  }
  pith_status_t model_info(uint32_t, pith_model_info_t* info) override {
    *info = pith_model_info_t{};
    info->tokens_per_page = 16;
    info->vocab_size = 256;
    return PITH_OK;
  }
  pith_status_t tokenize(uint32_t model, std::string_view text,
                         std::vector<uint32_t>* tokens) override {
    if (model != 1) return PITH_ERR_BAD_HANDLE;
    for (unsigned char ch : text) tokens->push_back(ch);
    return PITH_OK;
  }
  pith_status_t detokenize(uint32_t, std::span<const uint32_t> tokens, std::string* text) override {
    for (uint32_t t : tokens) *text += static_cast<char>(t);
    return PITH_OK;
  }
  pith_status_t vocab(uint32_t, std::string*) override { return PITH_ERR_UNSUPPORTED; }
  pith_status_t create_queue(uint32_t model, uint32_t* queue) override {
    if (model != 1) return PITH_ERR_BAD_HANDLE;
    *queue = 7;
    return PITH_OK;
  }
  pith_status_t destroy_queue(uint32_t q) override {
    return q == 7 ? PITH_OK : PITH_ERR_BAD_HANDLE;
  }
  pith_status_t synchronize(uint32_t, Completion done) override {
    done(PITH_OK, {});
    return PITH_OK;
  }
  pith_status_t set_queue_priority(uint32_t, uint32_t) override { return PITH_OK; }
  pith_status_t alloc_kvpages(uint32_t q, uint32_t n, std::vector<uint32_t>* out) override {
    if (q != 7) return PITH_ERR_BAD_HANDLE;
    if (pages_.size() + n > 8) return PITH_ERR_OUT_OF_KV_PAGES;
    for (uint32_t i = 0; i < n; ++i) {
      out->push_back(next_page_);
      pages_.insert(next_page_++);
    }
    return PITH_OK;
  }
  pith_status_t dealloc_kvpages(uint32_t, std::span<const uint32_t> pages) override {
    for (uint32_t p : pages)
      if (!pages_.count(p)) return PITH_ERR_BAD_HANDLE;
    for (uint32_t p : pages) pages_.erase(p);
    return PITH_OK;
  }
  pith_status_t alloc_embs(uint32_t, uint32_t, std::vector<uint32_t>*) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t dealloc_embs(uint32_t, std::span<const uint32_t>) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t copy_kvpage(uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t mask_kvpage(uint32_t, uint32_t, std::span<const uint8_t>) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t export_kvpages(uint32_t, std::span<const uint32_t>, std::string_view) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t unexport_kvpages(uint32_t, std::string_view) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t import_kvpages(uint32_t, std::string_view, std::vector<uint32_t>*) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t prefix_match(uint32_t, std::span<const uint32_t>, std::vector<uint32_t>*,
                             uint32_t*) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t prefix_insert(uint32_t, std::span<const uint32_t>,
                              std::span<const uint32_t>) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t embed_txt(uint32_t, std::span<const uint32_t>, std::span<const uint32_t>,
                          std::span<const uint32_t>) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t embed_img(uint32_t, std::span<const uint8_t>, std::span<const uint32_t>) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t forward(uint32_t, const ForwardArgs&) override { return PITH_ERR_UNSUPPORTED; }
  pith_status_t next_dist(uint32_t, uint32_t, uint32_t, Completion) override {
    return PITH_ERR_UNSUPPORTED;
  }
  pith_status_t forward_tokens(uint32_t q, const ForwardTokensArgs& a, Completion done) override {
    if (q != 7) return PITH_ERR_BAD_HANDLE;
    for (uint32_t p : a.kv_pages)
      if (!pages_.count(p)) return PITH_ERR_BAD_HANDLE;
    if (a.positions.size() != a.tokens.size() || a.output_indices.size() != 1 || a.top_k != 2)
      return PITH_ERR_BAD_ARGUMENT;
    // The result: k = 2, ids {last token + 1, 42}, probs {0.75, 0.25}; completed later, from
    // another thread, as the control layer would.
    // With token masks: the top id tells the words and set bits the host decoded.
    uint32_t bits = 0;
    for (uint64_t w : a.allowed) bits += static_cast<uint32_t>(std::popcount(w));
    uint32_t ids[2] = {a.allowed.empty() ? a.tokens[a.output_indices[0]] + 1
                                         : static_cast<uint32_t>(a.allowed.size()) * 1000 + bits +
                                               (a.allowed.back() >> 63 ? 100 : 0),
                       42};
    // With logit adjustments: the fields the host decoded (outputs, tokens, and the values).
    if (!a.adjust.empty()) {
      float values = 0;
      ids[0] = 9000000;
      for (const pith_logit_adjust_t& e : a.adjust) {
        ids[0] += e.token + 100000 * e.output;
        values += e.bias + e.repetition + e.penalty;
      }
      ids[0] += static_cast<uint32_t>(std::lround(100 * values)) * 100;
    }
    float probs[2] = {0.75f, 0.25f};
    std::string r(4 + 8 + 8, '\0');
    uint32_t k = 2;
    std::memcpy(r.data(), &k, 4);
    std::memcpy(r.data() + 4, ids, 8);
    std::memcpy(r.data() + 12, probs, 8);
    std::lock_guard lock(c_.mu);
    c_.completers.emplace_back([done = std::move(done), r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      done(PITH_OK, r);
    });
    return PITH_OK;
  }

 private:
  FakeCounters& c_;
  std::set<uint32_t> pages_;
  uint32_t next_page_ = 100;
};

class FakeModel final : public ModelApi {
 public:
  ~FakeModel() override {
    for (auto& t : counters.completers) t.join();
  }
  std::vector<std::string> model_names() override { return {"fake-a", "fake-b"}; }
  std::unique_ptr<ModelSession> open_session(uint64_t) override {
    return std::make_unique<FakeSession>(counters);
  }
  FakeCounters counters;
};

class RuntimeModelTest : public ::testing::TestWithParam<TierPolicy> {
 protected:
  void SetUp() override { ASSERT_TRUE(inferlet_built(wasm())); }
  static std::string wasm() { return std::string(PITH_INFERLET_DIR) + "/modelcalls.wasm"; }
  std::vector<std::string> run(ModelApi* model, ExitStatus* st, const std::string& program = wasm(),
                               std::vector<std::string> args = {"modelcalls"}) {
    RuntimeConfig c;
    c.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
    c.tiers = GetParam();
    c.model = model;
    Runtime rt(c);
    std::mutex mu;
    std::vector<std::string> messages;
    auto inst = rt.launch(rt.load_program_file(program), std::move(args),
                          [&](uint64_t, const InstanceEvent& e) {
                            std::lock_guard lock(mu);
                            if (e.kind == InstanceEvent::Kind::Message) messages.push_back(e.text);
                          });
    *st = inst->wait();
    std::lock_guard lock(mu);
    return messages;
  }
};

INSTANTIATE_TEST_SUITE_P(Tiers, RuntimeModelTest,
                         ::testing::Values(TierPolicy::NativeOnly, TierPolicy::InterpreterOnly),
                         [](const auto& info) {
                           return info.param == TierPolicy::NativeOnly ? "Native" : "Interpreter";
                         });

TEST_P(RuntimeModelTest, CallsAreDecodedRoutedAndAnswered) {
  FakeModel model;
  ExitStatus st;
  std::vector<std::string> m = run(&model, &st);
  EXPECT_EQ(st.reason, "exited with code 0");
  EXPECT_EQ(m, (std::vector<std::string>{
                   "models: fake-a,fake-b",
                   "open missing: not found",
                   "tokens: 104 101 108 108 111 ",
                   "text: hello",
                   "pages: 100,102",
                   "too many: out of KV pages",
                   "dist: k=2 top=112 p=75",
                   "allowed: top=3103",
                   "allowed out of memory: bad pointer",
                   "adjusted: top=9067516",
                   "adjusted out of memory: bad pointer",
                   "dealloc: ok",
                   "double dealloc: bad handle",
                   "bad pointer: bad pointer",
               }));
  EXPECT_EQ(model.counters.sessions_opened, 1);
  EXPECT_EQ(model.counters.sessions_closed, 1);  // released when the instance ended
  EXPECT_EQ(model.counters.pages_left_at_close, 0);
}

TEST_P(RuntimeModelTest, WithoutAModelEveryModelCallSaysSo) {
  ExitStatus st;
  std::vector<std::string> m = run(nullptr, &st);
  EXPECT_EQ(st.reason, "exited with code 0");
  EXPECT_EQ(m, (std::vector<std::string>{"models: no model"}));
}

// The guest's forward arguments and results cross the real bridge and controller: the answer
// appears only if every step's context (pages, positions, slots) reached the backend intact.
TEST_P(RuntimeModelTest, SdkCompletionThroughTheControlLayerOnTheFakeBackend) {
  const std::string program = std::string(PITH_INFERLET_DIR) + "/text_completion.wasm";
  ASSERT_TRUE(inferlet_built(program));
  const std::string model_file = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
  const Tokenizer tokenizer = Tokenizer::load(model_file);
  BackendOptions options;
  options.kv_memory_bytes = size_t{1} << 20;
  FakeBackend fake(gguf_model_config(GGUFFile(model_file)), options);
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> answer = tokenizer.encode(" there was a fox", false, false);
  fake.set_script(script_continuation(tokenizer.encode(prompt, false, false), answer));
  Controller controller(fake, {});
  ControlModelApi api(controller, tokenizer, "tiny-f32");
  ExitStatus st;
  std::vector<std::string> m = run(&api, &st, program,
                                   {"text_completion", "--prompt", prompt, "--max-tokens",
                                    std::to_string(answer.size()), "--tokens"});
  EXPECT_EQ(st.reason, "exited with code 0");
  std::string ids;
  for (int32_t t : answer) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(m, (std::vector<std::string>{tokenizer.decode(answer), ids}));
  EXPECT_GE(fake.counters().batches, answer.size());
  EXPECT_EQ(fake.counters().rejected, 0u);
  EXPECT_EQ(controller.gauges().pages_free, controller.gauges().pages_total);  // released at exit
}

}  // namespace
}  // namespace pith::runtime
