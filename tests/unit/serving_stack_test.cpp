// The serving stack's failure policies across layers: when KV memory runs out, the newest
// inferlet is terminated with a reason its client sees and the older one gets its pages;
// a per-inferlet quota refuses with an error the inferlet handles instead.
#include "server/serving_stack.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "built_inferlet.h"

namespace pith {
namespace {

using namespace std::chrono_literals;
const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
const std::string kKvAlloc = std::string(PITH_INFERLET_DIR) + "/kv_alloc.wasm";

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  runtime::EventSink sink() {
    return [this](uint64_t, const runtime::InstanceEvent& e) {
      if (e.kind != runtime::InstanceEvent::Kind::kMessage) return;
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
};

ServingOptions options(uint32_t pages, uint32_t quota = 0) {
  ServingOptions so;
  so.model_path = kModel;
  so.quiet_load = true;
  so.engine.n_threads = 2;
  so.engine.kv_page_size = 16;
  so.engine.kv_memory_bytes = size_t{pages} * 2 /*layers*/ * 2 * 16 * 32 /*kv_dim*/ * sizeof(float);
  so.control.max_kv_pages_per_instance = quota;
  so.runtime.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  return so;
}

class ServingStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(inferlet_built(kKvAlloc));
  }
};

TEST_F(ServingStackTest, ContentionTerminatesTheNewestInferletWithAReason) {
  ServingStack stack(options(8));
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

}  // namespace
}  // namespace pith
