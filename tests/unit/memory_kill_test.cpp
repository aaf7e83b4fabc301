// How `pith serve` learns that the KV contention policy ended an instance: the serving stack's
// on_memory_kill hook marks the victim's record with PITH_ERR_OUT_OF_KV_PAGES, so the OpenAI
// route answers 503 by that code (never by the wording of the exit reason).
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "server/completion_session.h"
#include "server/instance_registry.h"
#include "server/openai_api.h"
#include "stack/serving_stack.h"

namespace pith::server {
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
};

std::shared_ptr<InstanceRecord> record_of(const runtime::Instance& inst) {
  auto rec = std::make_shared<InstanceRecord>();
  rec->id = inst.id();
  return rec;
}

pith_status_t ended_by(const InstanceRegistry& registry, uint64_t id) {
  auto rec = registry.find(id);
  std::lock_guard lock(rec->mu);
  return rec->ended_by;
}

TEST(MemoryKill, TheContentionVictimIsMarkedByCode) {
  if (!std::filesystem::exists(kKvAlloc)) GTEST_SKIP() << "inferlets not built";
  InstanceRegistry registry;
  ServingOptions so;
  so.model_path = kModel;
  so.quiet_load = true;
  so.engine.device = "cpu";
  so.engine.n_threads = 2;
  so.engine.kv_page_size = 16;
  so.engine.kv_dtype = KvDType::F32;  // the budget below is reckoned in f32 pages
  so.engine.kv_memory_bytes = 8 * 2 /*layers*/ * 2 * 16 * 32 /*kv_dim*/ * sizeof(float);  // 8 pages
  so.runtime.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
  so.control.kv_pressure = KvPressure::Kill;  // the policy that ends instances
  so.on_memory_kill = [&registry](uint64_t id) {
    registry.mark_ended_by(id, PITH_ERR_OUT_OF_KV_PAGES);
  };
  ServingStack stack(so);
  ASSERT_EQ(stack.controller().gauges().pages_total, 8u);
  auto prog = stack.runtime().load_program_file(kKvAlloc);
  Inbox older, newer;
  auto a = stack.launch(prog, {"kv_alloc", "2"}, older.sink());
  registry.add(record_of(*a));
  ASSERT_EQ(older.wait_nth(0), "ok 2");
  auto b = stack.launch(prog, {"kv_alloc", "5"}, newer.sink());
  registry.add(record_of(*b));
  ASSERT_EQ(newer.wait_nth(0), "ok 5");
  EXPECT_EQ(ended_by(registry, b->id()), PITH_OK);
  a->push_message("alloc 4");  // 1 page free: the newer instance is ended for its pages
  EXPECT_EQ(older.wait_nth(1), "ok 6");
  EXPECT_EQ(b->wait().kind, runtime::ExitStatus::Kind::Killed);
  EXPECT_EQ(ended_by(registry, b->id()), PITH_ERR_OUT_OF_KV_PAGES);
  EXPECT_EQ(failure_response(ended_by(registry, b->id())).http_status, 503u);
  // A client's own kill is not the host's doing: no code.
  a->terminate("killed by client");
  a->wait();
  EXPECT_EQ(ended_by(registry, a->id()), PITH_OK);
}

}  // namespace
}  // namespace pith::server
