// The serving stack's failure policies across layers: when KV memory runs out, the newest
// inferlet is terminated with a reason its client sees and the older one gets its pages;
// a per-inferlet quota refuses with an error the inferlet handles instead. These exercise
// scheduling and resources only, so the stack runs on the weightless fake backend (device
// "fake": the tiny model's config and tokenizer, no weights); the fake's scripted outputs then
// show that real inferlets decode through every layer, batched across instances, and that a
// vocabulary-only GGUF serves a full-size model shape. Numerics against the real engine live in
// inferlet_model_test and the end-to-end tests.
#include "stack/serving_stack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>

#include "built_inferlet.h"
#include "engine/fake_backend.h"

namespace pith {
namespace {

using namespace std::chrono_literals;
const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
const std::string kKvAlloc = std::string(PITH_INFERLET_DIR) + "/kv_alloc.wasm";
const std::string kTextCompletion = std::string(PITH_INFERLET_DIR) + "/text_completion.wasm";

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  runtime::EventSink sink() {
    return [this](uint64_t, const runtime::InstanceEvent& e) {
      if (e.kind != runtime::InstanceEvent::Kind::Message) return;
      std::lock_guard lock(mu);
      messages.push_back(e.text);
      cv.notify_all();
    };
  }
  std::string wait_nth(size_t n) {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, 30s, [&] { return messages.size() > n; })) return "<timeout>";
    return messages[n];
  }
  size_t messages_now() {
    std::lock_guard lock(mu);
    return messages.size();
  }
};

ServingOptions options(uint32_t pages, uint32_t quota = 0,
                       KvPressure pressure = KvPressure::Suspend) {
  ServingOptions so;
  so.control.kv_pressure = pressure;
  so.model_path = kModel;
  so.quiet_load = true;
  so.engine.device = "fake";
  so.engine.n_threads = 2;
  so.engine.kv_page_size = 16;
  so.engine.kv_memory_bytes = size_t{pages} * 2 /*layers*/ * 2 * 16 * 32 /*kv_dim*/ * sizeof(float);
  so.control.max_kv_pages_per_instance = quota;
  so.runtime.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  return so;
}

std::string csv(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

class ServingStackTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(inferlet_built(kKvAlloc)); }
};

TEST_F(ServingStackTest, ContentionTerminatesTheNewestInferletWithAReason) {
  ServingStack stack(options(8, 0, KvPressure::Kill));
  ASSERT_EQ(stack.backend().info().name, "fake");
  ASSERT_EQ(stack.controller().gauges().pages_total, 8u);
  auto prog = stack.runtime().load_program_file(kKvAlloc);
  Inbox older, newer;
  auto a = stack.launch(prog, {"kv_alloc", "2"}, older.sink());
  ASSERT_EQ(older.wait_nth(0), "ok 2");
  auto b = stack.launch(prog, {"kv_alloc", "5"}, newer.sink());
  ASSERT_EQ(newer.wait_nth(0), "ok 5");
  // The older one needs 4 more: only 1 is free, so the newer inferlet is terminated.
  a->push_message("alloc 4");
  EXPECT_EQ(older.wait_nth(1), "ok 6");
  EXPECT_EQ(b->wait().reason, "terminated: KV memory needed by an older inferlet");
  EXPECT_EQ(stack.controller().gauges().instances_killed_for_memory, 1u);
  // Nothing newer is left to terminate: the request fails with an error the inferlet sees.
  a->push_message("alloc 8");
  EXPECT_EQ(older.wait_nth(2), "error: out of KV pages");
  a->push_message("quit");
  EXPECT_EQ(a->wait().reason, "exited with code 0");
  EXPECT_EQ(stack.controller().gauges().pages_free, 8u);
}

TEST_F(ServingStackTest, UnderPressureTheNewestInferletIsSuspendedNotKilled) {
  ServingStack stack(options(8));
  auto prog = stack.runtime().load_program_file(kKvAlloc);
  Inbox older, newer;
  auto a = stack.launch(prog, {"kv_alloc", "2"}, older.sink());
  ASSERT_EQ(older.wait_nth(0), "ok 2");
  auto b = stack.launch(prog, {"kv_alloc", "5"}, newer.sink());
  ASSERT_EQ(newer.wait_nth(0), "ok 5");
  // The older one needs 4 more, 1 is free: the newer one's pages go to host memory.
  a->push_message("alloc 4");
  EXPECT_EQ(older.wait_nth(1), "ok 6");
  EXPECT_EQ(stack.controller().gauges().instances_suspended, 1u);
  // The suspended one asks for a page: it waits (parked) until the older one gives some back,
  // then is resumed with its 5 pages and granted the sixth.
  b->push_message("alloc 1");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(newer.messages_now(), 1u);
  a->push_message("free 6");
  EXPECT_EQ(older.wait_nth(2), "ok 0");
  EXPECT_EQ(newer.wait_nth(1), "ok 6");
  auto g = stack.controller().gauges();
  EXPECT_EQ(g.instances_killed_for_memory, 0u);
  EXPECT_EQ(g.suspensions, 1u);
  EXPECT_EQ(g.resumes, 1u);
  // Holding 6 of 8 and alone, asking for 3 more can never be met: refused, not waited on.
  b->push_message("alloc 3");
  EXPECT_EQ(newer.wait_nth(2), "error: out of KV pages");
  // A fail-fast inferlet is refused at once where it would otherwise wait.
  a->push_message("failfast");
  EXPECT_EQ(older.wait_nth(3), "ok failfast");
  a->push_message("alloc 3");
  EXPECT_EQ(older.wait_nth(4), "error: out of KV pages");
  a->push_message("quit");
  b->push_message("quit");
  EXPECT_EQ(a->wait().reason, "exited with code 0");
  EXPECT_EQ(b->wait().reason, "exited with code 0");
  EXPECT_EQ(stack.controller().gauges().pages_free, 8u);
}

TEST_F(ServingStackTest, AKillEndsAnInferletWaitingForKvMemory) {
  ServingStack stack(options(4));
  auto prog = stack.runtime().load_program_file(kKvAlloc);
  Inbox older, newer;
  auto a = stack.launch(prog, {"kv_alloc", "3"}, older.sink());
  ASSERT_EQ(older.wait_nth(0), "ok 3");
  auto b = stack.launch(prog, {"kv_alloc", "2"}, newer.sink());  // waits: the older holds 3 of 4
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(stack.controller().gauges().kv_waiting, 1u);
  b->kill();
  EXPECT_EQ(b->wait().reason, "killed: by request");
  EXPECT_EQ(stack.controller().gauges().kv_waiting, 0u);
  a->push_message("quit");
  EXPECT_EQ(a->wait().reason, "exited with code 0");
  EXPECT_EQ(stack.controller().gauges().pages_free, 4u);
}

TEST_F(ServingStackTest, QuotaRefusesWithoutTerminatingAnyone) {
  ServingStack stack(options(16, /*quota=*/3));
  auto prog = stack.runtime().load_program_file(kKvAlloc);
  Inbox inbox;
  auto a = stack.launch(prog, {"kv_alloc", "3"}, inbox.sink());
  ASSERT_EQ(inbox.wait_nth(0), "ok 3");
  a->push_message("alloc 1");
  EXPECT_EQ(inbox.wait_nth(1), "error: out of KV pages");
  a->push_message("quit");
  EXPECT_EQ(a->wait().reason, "exited with code 0");
  EXPECT_EQ(stack.controller().gauges().instances_killed_for_memory, 0u);
}

// The script answers only when the context it sees is the prompt followed by the answer so far,
// so every token checks the page tables, positions and prefix-cache pages the control layer built.
TEST_F(ServingStackTest, ScriptedCompletionsRunThroughEveryLayerBatchedAcrossInferlets) {
  ASSERT_TRUE(inferlet_built(kTextCompletion));
  ServingStack stack(options(256));
  auto& fake = dynamic_cast<FakeBackend&>(stack.backend());
  // Longer than two KV pages, so later instances reuse the first one's pages.
  const std::string prompt =
      "The quick brown fox jumps over the lazy dog while the cat watches from the window.";
  const std::vector<int32_t> prompt_ids = stack.tokenizer().encode(prompt, false, false);
  const std::vector<int32_t> answer = stack.tokenizer().encode(" Then it naps.", false, false);
  ASSERT_GT(prompt_ids.size(), 32u);
  fake.set_script(script_continuation(prompt_ids, answer));
  fake.set_forward_delay(2ms);
  auto prog = stack.runtime().load_program_file(kTextCompletion);
  const std::vector<std::string> args{
      "text_completion", "--prompt", prompt, "--max-tokens", std::to_string(answer.size()),
      "--tokens"};
  Inbox first;
  ASSERT_EQ(stack.launch(prog, args, first.sink())->wait().reason, "exited with code 0");
  EXPECT_EQ(first.wait_nth(1), csv(answer));
  EXPECT_EQ(first.wait_nth(0), stack.tokenizer().decode(answer));

  constexpr int kInstances = 6;
  std::vector<Inbox> inboxes(kInstances);
  std::vector<std::shared_ptr<runtime::Instance>> insts;
  for (auto& inbox : inboxes) insts.push_back(stack.launch(prog, args, inbox.sink()));
  for (int i = 0; i < kInstances; ++i) {
    EXPECT_EQ(insts[i]->wait().reason, "exited with code 0");
    EXPECT_EQ(inboxes[i].wait_nth(1), csv(answer)) << "instance " << i;
  }
  EXPECT_GT(fake.counters().max_batch_sequences, 1u)
      << "forwards of different inferlets were never batched";
  EXPECT_GT(stack.controller().gauges().prefix_hit_tokens, 0u);
  EXPECT_EQ(fake.counters().rejected, 0u);
}

// A GGUF with Llama 2 7B's metadata and vocabulary but no tensors serves the fake stack: a
// full-size shape (32 layers, 4096 wide, 32000 tokens) without a byte of weights.
TEST_F(ServingStackTest, AVocabularyOnlyGgufServesAFullSizeShapeOnTheFake) {
  ASSERT_TRUE(inferlet_built(kTextCompletion));
  ServingOptions so = options(0);
  so.model_path = std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-spm.gguf";
  const size_t page_bytes = size_t{32} * 2 * 16 * 4096 * sizeof(float);
  so.engine.kv_memory_bytes = 4 * page_bytes;
  ServingStack stack(so);
  EXPECT_EQ(stack.weights().config.n_layers, 32u);
  EXPECT_EQ(stack.backend().config().vocab_size, 32000u);
  EXPECT_EQ(stack.controller().gauges().pages_total, 4u);
  auto prog = stack.runtime().load_program_file(kTextCompletion);
  std::vector<std::string> runs;
  for (int run = 0; run < 2; ++run) {
    Inbox inbox;
    auto inst = stack.launch(prog,
                             {"text_completion", "--prompt", "Hello", "--max-tokens", "8",
                              "--tokens", "--temperature", "0"},
                             inbox.sink());
    EXPECT_EQ(inst->wait().reason, "exited with code 0");
    runs.push_back(inbox.wait_nth(1));
  }
  EXPECT_EQ(std::count(runs[0].begin(), runs[0].end(), ','), 7) << runs[0];
  EXPECT_EQ(runs[0], runs[1]);  // deterministic, prefix cache or not
}

}  // namespace
}  // namespace pith
