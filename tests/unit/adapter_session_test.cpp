// LoRA adapters through the runtime's ModelApi over the real control layer and CPU engine: an
// instance opens an adapter by name (traits list it), and both ABI forms give the same
// distribution: forward_with_adapter over Embeds, and forward_tokens on a queue bound with
// queue_set_adapter. Handles not opened are refused; an adapter unloaded while an instance holds
// it keeps serving that instance and is gone for new ones.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <future>

#include "engine/engine.h"
#include "engine/lora_adapter.h"
#include "engine/model_loader.h"
#include "model_gen/lora_gen.h"
#include "runtime/control_model_api.h"

namespace pith::runtime {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";

struct Fixture {
  Fixture() {
    weights = load_model(kModel, LoadOptions{.quiet = true});
    EngineOptions o;
    o.kv_memory_bytes = size_t{4} << 20;
    o.n_threads = 1;
    engine = std::make_unique<Engine>(weights, o);
    ctl = std::make_unique<Controller>(*engine, ControllerOptions{});
    api = std::make_unique<ControlModelApi>(*ctl, tokenizer, "tiny");
    LoraGenOptions g;
    g.base_path = kModel;
    g.format = "gguf";
    g.output =
        (fs::temp_directory_path() / ("pith_adapter_session_" + std::to_string(getpid()) + ".gguf"))
            .string();
    g.rank = 4;
    g.std = 0.05f;
    g.seed = 3;
    generate_lora(g);
    adapter_path = g.output;
    AdapterInfo info;
    info.source = g.output;
    ctl->adapters().load("style", load_lora_adapter(g.output, *weights), info);
  }
  ~Fixture() { fs::remove(adapter_path); }

  std::shared_ptr<const ModelWeights> weights;
  Tokenizer tokenizer = Tokenizer::load(kModel);
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Controller> ctl;
  std::unique_ptr<ControlModelApi> api;
  std::string adapter_path;
};

// Waits for a Completion's bytes.
struct Waiter {
  std::promise<std::pair<pith_status_t, std::string>> p;
  Completion done() {
    return [this](pith_status_t st, std::string bytes) { p.set_value({st, std::move(bytes)}); };
  }
  std::pair<pith_status_t, std::string> get() { return p.get_future().get(); }
};

// The top token id of a serialized distribution (abi.h: k, ids, probs).
uint32_t top_id(const std::string& bytes) {
  uint32_t id = 0;
  std::memcpy(&id, bytes.data() + 4, 4);
  return id;
}
float top_prob(const std::string& bytes) {
  uint32_t k = 0;
  std::memcpy(&k, bytes.data(), 4);
  float p = 0;
  std::memcpy(&p, bytes.data() + 4 + 4 * size_t{k}, 4);
  return p;
}

const std::vector<uint32_t> kPrompt = {1, 450, 499, 173, 170, 299, 432};

// forward_tokens of kPrompt on a fresh queue (adapter: 0 = the queue's), top-1 of the last.
std::string run_tokens(ModelSession& s, uint32_t model, uint32_t queue_adapter,
                       uint32_t call_adapter) {
  uint32_t q = 0;
  EXPECT_EQ(s.create_queue(model, &q), PITH_OK);
  if (queue_adapter) {
    EXPECT_EQ(s.set_queue_adapter(q, queue_adapter), PITH_OK);
  }
  std::vector<uint32_t> pages;
  EXPECT_EQ(s.alloc_kvpages(q, 1, &pages), PITH_OK);
  ForwardTokensArgs a;
  a.tokens = kPrompt;
  for (uint32_t i = 0; i < kPrompt.size(); ++i) a.positions.push_back(i);
  a.kv_pages = pages;
  a.last_page_len = static_cast<uint32_t>(kPrompt.size());
  a.output_indices = {static_cast<uint32_t>(kPrompt.size() - 1)};
  a.top_k = 4;
  a.adapter = call_adapter;
  Waiter w;
  EXPECT_EQ(s.forward_tokens(q, a, w.done()), PITH_OK);
  auto [st, bytes] = w.get();
  EXPECT_EQ(st, PITH_OK);
  EXPECT_EQ(s.dealloc_kvpages(q, pages), PITH_OK);
  return bytes;
}

TEST(AdapterSession, BothAbiFormsRunTheAdapter) {
  Fixture f;
  auto s = f.api->open_session(1);
  uint32_t model = 0, adapter = 0;
  ASSERT_EQ(s->open_model("", &model), PITH_OK);
  std::vector<std::string> traits;
  ASSERT_EQ(s->model_traits(model, &traits), PITH_OK);
  EXPECT_NE(std::find(traits.begin(), traits.end(), "adapter=style"), traits.end());
  EXPECT_NE(std::find(traits.begin(), traits.end(), "forward_with_adapter"), traits.end());
  EXPECT_EQ(s->open_adapter(model, "nope", &adapter), PITH_ERR_NOT_FOUND);
  ASSERT_EQ(s->open_adapter(model, "style", &adapter), PITH_OK);

  const std::string base = run_tokens(*s, model, 0, 0);
  const std::string bound = run_tokens(*s, model, adapter, 0);
  const std::string explicit_call = run_tokens(*s, model, 0, adapter);
  EXPECT_EQ(bound, explicit_call);
  EXPECT_NE(base, bound) << "the adapter should change the distribution";

  // forward_with_adapter over Embeds, then next_dist.
  uint32_t q = 0;
  ASSERT_EQ(s->create_queue(model, &q), PITH_OK);
  std::vector<uint32_t> pages, in, out;
  ASSERT_EQ(s->alloc_kvpages(q, 1, &pages), PITH_OK);
  ASSERT_EQ(s->alloc_embs(q, uint32_t(kPrompt.size()), &in), PITH_OK);
  ASSERT_EQ(s->alloc_embs(q, 1, &out), PITH_OK);
  std::vector<uint32_t> pos;
  for (uint32_t i = 0; i < kPrompt.size(); ++i) pos.push_back(i);
  ASSERT_EQ(s->embed_txt(q, kPrompt, pos, in), PITH_OK);
  ForwardArgs fa;
  fa.kv_pages = pages;
  fa.last_page_len = static_cast<uint32_t>(kPrompt.size());
  fa.input_embs = in;
  fa.output_embs = out;
  fa.adapter = adapter;
  ASSERT_EQ(s->forward(q, fa), PITH_OK);
  Waiter w;
  ASSERT_EQ(s->next_dist(q, out[0], 4, w.done()), PITH_OK);
  auto [st, bytes] = w.get();
  ASSERT_EQ(st, PITH_OK);
  EXPECT_EQ(top_id(bytes), top_id(bound));
  EXPECT_NEAR(top_prob(bytes), top_prob(bound), 1e-5);

  // A handle that was never opened.
  fa.adapter = adapter + 5;
  EXPECT_EQ(s->forward(q, fa), PITH_ERR_BAD_HANDLE);
  EXPECT_EQ(s->set_queue_adapter(q, adapter + 5), PITH_ERR_BAD_HANDLE);
}

TEST(AdapterSession, UnloadKeepsServingTheInstanceThatHoldsIt) {
  Fixture f;
  auto s = f.api->open_session(1);
  uint32_t model = 0, adapter = 0;
  ASSERT_EQ(s->open_model("", &model), PITH_OK);
  ASSERT_EQ(s->open_adapter(model, "style", &adapter), PITH_OK);
  const std::string before = run_tokens(*s, model, adapter, 0);
  ASSERT_TRUE(f.ctl->adapters().unload("style"));
  EXPECT_FALSE(f.ctl->adapters().unload("style"));
  EXPECT_EQ(run_tokens(*s, model, adapter, 0), before);  // still loaded for this instance
  auto other = f.api->open_session(2);
  uint32_t m2 = 0, a2 = 0;
  ASSERT_EQ(other->open_model("", &m2), PITH_OK);
  EXPECT_EQ(other->open_adapter(m2, "style", &a2), PITH_ERR_NOT_FOUND);
  EXPECT_TRUE(f.ctl->adapters().list().empty());
}

TEST(AdapterSession, RegistryRefusesDuplicatesBadNamesAndTooMany) {
  Fixture f;
  auto ad = load_lora_adapter(f.adapter_path, *f.weights);
  EXPECT_THROW(f.ctl->adapters().load("style", ad, {}), Error);
  EXPECT_THROW(f.ctl->adapters().load("bad name", ad, {}), Error);
  EXPECT_THROW(f.ctl->adapters().load("", ad, {}), Error);
  EngineOptions o;
  o.kv_memory_bytes = size_t{1} << 20;
  o.n_threads = 1;
  Engine other_engine(f.weights, o);  // its own ids
  AdapterRegistry small(other_engine, 1);
  small.load("one", ad, {});
  EXPECT_THROW(small.load("two", ad, {}), Error);
  auto lease = small.open("one");
  ASSERT_TRUE(lease);
  EXPECT_EQ(small.list()[0].users, 1u);
}

}  // namespace
}  // namespace pith::runtime
