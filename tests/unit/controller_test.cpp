// The control layer: virtual resources, command-queue ordering, batching, synchronize,
// contention, failure isolation and the failure codes and messages. Scheduling and resource
// tests run on the weightless FakeBackend; the tests that compare outputs with the engine's own
// forward (queue order, chunked prefill) run on the real engine with the tiny test model.
#include "control/controller.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "engine/model_loader.h"

namespace pith {

namespace {

const std::string kModel = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";

std::shared_ptr<const ModelWeights> weights() {
  static auto w = load_model(kModel, LoadOptions{.quiet = true});
  return w;
}

// The tiny model's shape, for the fake (it needs only the vocabulary and d_model).
ModelConfig fake_config() {
  ModelConfig c;
  c.vocab_size = 32000;
  c.d_model = 64;
  return c;
}

// A fake with the same pool shape as small_engine(pages).
std::unique_ptr<FakeBackend> small_fake(uint32_t pages) {
  return std::make_unique<FakeBackend>(fake_config(), FakeBackendOptions{16, pages, 64});
}

EngineOptions small_engine(size_t pages) {
  EngineOptions o;
  o.kv_page_size = 16;
  const auto& c = weights()->config;
  o.kv_memory_bytes = pages * size_t{c.n_layers} * 2 * 16 * c.kv_dim() * sizeof(float);
  o.max_embeds = 64;
  o.n_threads = 2;
  return o;
}

// Submits a call and blocks until it completes.
CallOutcome wait_for(const std::function<Result<void>(CallCompletion)>& submit) {
  std::promise<CallOutcome> p;
  auto f = p.get_future();
  auto s = submit([&](CallOutcome&& o) { p.set_value(std::move(o)); });
  if (!s) return s.failure();
  return f.get();
}

// Moves a result's value into `out` and passes its code on, so assertions read
// ASSERT_EQ(into(ctl.alloc_pages(1, 3), pages), Status::Ok).
template <typename T>
Result<void> into(Result<T> r, T& out) {
  if (!r) return r.failure();
  out = std::move(*r);
  return {};
}

Result<void> into(Result<Controller::PrefixMatch> r, std::vector<uint32_t>& handles,
                  size_t& matched) {
  if (!r) return r.failure();
  handles = std::move(r->handles);
  matched = r->matched;
  return {};
}

SequenceInput prefill(std::vector<int32_t> tokens, uint32_t first_pos, std::vector<uint32_t> pages,
                      uint32_t last_len) {
  SequenceInput s;
  s.tokens = std::move(tokens);
  for (size_t i = 0; i < s.tokens.size(); ++i)
    s.positions.push_back(first_pos + static_cast<uint32_t>(i));
  s.kv_pages = std::move(pages);
  s.last_page_len = last_len;
  s.outputs.push_back({static_cast<uint32_t>(s.tokens.size() - 1), OutputKind::TopK, 5, 0});
  return s;
}

}  // namespace

TEST(Controller, HandlesArePerInstance) {
  auto backend = small_fake(16);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  std::vector<uint32_t> a, b;
  ASSERT_EQ(into(ctl.alloc_pages(1, 3), a), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_pages(2, 1), b), Status::Ok);
  EXPECT_EQ(ctl.pages_held(1), 3u);
  // Instance 2 holds one handle; instance 1's other handles mean nothing to it.
  uint32_t foreign = a[2];
  EXPECT_EQ(ctl.dealloc_pages(2, std::vector<uint32_t>{foreign}), Status::BadHandle);
  EXPECT_EQ(ctl.gauges().pages_free, 12u);
  EXPECT_EQ(ctl.dealloc_pages(1, a), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_free, 15u);
  EXPECT_EQ(ctl.dealloc_pages(1, a), Status::BadHandle);  // already gone
  ctl.release_instance(2);
  EXPECT_EQ(ctl.gauges().pages_free, 16u);
}

TEST(Controller, ExportImportShareReferenceCountedPages) {
  auto backend = small_fake(8);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  std::vector<uint32_t> pages, imported;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), pages), Status::Ok);
  ASSERT_EQ(ctl.export_pages(1, "sys", pages, /*persistent=*/true), Status::Ok);
  EXPECT_EQ(ctl.export_pages(1, "sys", pages, true), Status::AlreadyExists);
  ctl.release_instance(1);  // exporter ends; persistent export keeps the pages
  EXPECT_EQ(ctl.gauges().pages_free, 6u);
  ASSERT_EQ(into(ctl.import_pages(2, "sys"), imported), Status::Ok);
  EXPECT_EQ(imported.size(), 2u);
  EXPECT_EQ(ctl.remove_export("sys"), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_free, 6u);  // still held by the importer
  ASSERT_EQ(ctl.dealloc_pages(2, imported), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_free, 8u);
  EXPECT_EQ(into(ctl.import_pages(2, "sys"), imported), Status::NotFound);

  // A non-persistent export goes with its exporter.
  ctl.register_instance(3, nullptr);
  ASSERT_EQ(into(ctl.alloc_pages(3, 1), pages), Status::Ok);
  ASSERT_EQ(ctl.export_pages(3, "tmp", pages, false), Status::Ok);
  ctl.release_instance(3);
  EXPECT_EQ(into(ctl.import_pages(2, "tmp"), imported), Status::NotFound);
  EXPECT_EQ(ctl.gauges().pages_free, 8u);
}

TEST(Controller, QueueRunsInOrderAndMatchesOnePrefill) {
  Engine engine(weights(), small_engine(16));
  Controller ctl(engine, {});
  ctl.register_instance(1, nullptr);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), pages), Status::Ok);
  std::vector<int32_t> prompt{
      1,   450, 496, 173, 701, 299, 432, 172, 975,
      278, 173, 112, 322, 278, 397, 710, 298};  // 17 tokens: spills into page 2
  // Submit prefill(16) and decode(1) back to back without waiting: the decode reads the page
  // the prefill writes, so it must run after it.
  std::promise<CallOutcome> p1, p2;
  std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
  ASSERT_EQ(ctl.forward(1, q, prefill(head, 0, {pages[0]}, 16),
                        [&](CallOutcome&& o) { p1.set_value(std::move(o)); }),
            Status::Ok);
  ASSERT_EQ(ctl.forward(1, q, prefill({prompt.back()}, 16, pages, 1),
                        [&](CallOutcome&& o) { p2.set_value(std::move(o)); }),
            Status::Ok);
  auto o1 = p1.get_future().get();
  auto o2 = p2.get_future().get();
  ASSERT_EQ(o1.code(), Status::Ok) << o1.message();
  ASSERT_EQ(o2.code(), Status::Ok) << o2.message();

  // Reference: the whole prompt in one forward straight on the engine.
  auto ref_pages = engine.kv_pool().allocate(2);
  auto ref = engine.forward({prefill(prompt, 0, ref_pages, 1)});
  const auto& got = o2->forward.outputs.at(0).dist;
  const auto& want = ref[0].outputs.at(0).dist;
  ASSERT_EQ(got.ids, want.ids);
  for (size_t i = 0; i < got.probs.size(); ++i) EXPECT_NEAR(got.probs[i], want.probs[i], 1e-5);
}

TEST(Controller, HorizontalBatchingAcrossInstances) {
  auto backend = small_fake(32);
  ControllerOptions opt;
  opt.policy = "k:8";  // hold until all 8 are queued, so they must form one batch
  Controller ctl(*backend, opt);
  std::atomic<uint32_t> max_calls{0};
  ctl.set_batch_observer([&](const BatchStats& s) {
    if (s.calls > max_calls) max_calls = s.calls;
  });
  std::vector<std::promise<CallOutcome>> done(8);
  for (InstanceId i = 1; i <= 8; ++i) {
    ctl.register_instance(i, nullptr);
    QueueId q;
    ASSERT_EQ(into(ctl.create_queue(i), q), Status::Ok);
    std::vector<uint32_t> pages;
    ASSERT_EQ(into(ctl.alloc_pages(i, 1), pages), Status::Ok);
    ASSERT_EQ(ctl.forward(i, q, prefill({1, int32_t(100 + i), 7}, 0, pages, 3),
                          [&, i](CallOutcome&& o) { done[i - 1].set_value(std::move(o)); }),
              Status::Ok);
  }
  for (auto& d : done) EXPECT_EQ(d.get_future().get().code(), Status::Ok);
  EXPECT_EQ(max_calls.load(), 8u);
  EXPECT_EQ(ctl.gauges().batches, 1u);
}

TEST(Controller, SynchronizeResolvesAfterEarlierCalls) {
  auto backend = small_fake(8);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 1), pages), Status::Ok);
  std::atomic<bool> forward_done{false};
  ASSERT_EQ(ctl.forward(1, q, prefill({1, 2, 3, 4}, 0, pages, 4),
                        [&](CallOutcome&&) { forward_done = true; }),
            Status::Ok);
  std::promise<bool> synced;
  ASSERT_EQ(ctl.synchronize(1, q, [&] { synced.set_value(forward_done.load()); }), Status::Ok);
  EXPECT_TRUE(synced.get_future().get());
  // On an idle queue it resolves at once.
  bool now = false;
  ASSERT_EQ(ctl.synchronize(1, q, [&] { now = true; }), Status::Ok);
  EXPECT_TRUE(now);
}

TEST(Controller, BadRequestsFailAloneWithClearErrors) {
  auto backend = small_fake(8);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 1), pages), Status::Ok);
  auto submit = [&](SequenceInput s) {
    return ctl.forward(1, q, std::move(s), [](CallOutcome&&) {});
  };
  auto bad_token = submit(prefill({1, 99999}, 0, pages, 2));
  EXPECT_EQ(bad_token, Status::BadArgument);  // token id
  EXPECT_NE(bad_token.message().find("99999"), std::string::npos);
  EXPECT_EQ(submit(prefill({1, 2}, 0, {pages[0] + 100}, 2)), Status::BadHandle);
  EXPECT_EQ(submit(prefill({1, 2, 3}, 0, pages, 2)), Status::BadArgument);  // 3 inputs, 2 slots
  EXPECT_EQ(submit(prefill({1, 2}, 0, pages, 17)), Status::BadArgument);    // > page size
  auto masked = prefill({1, 2}, 0, pages, 2);
  masked.mask = {{1, 0}, {1}};  // second row covers 1 slot, context has 2
  auto bad_mask = submit(masked);
  EXPECT_EQ(bad_mask, Status::BadArgument);
  EXPECT_EQ(bad_mask.message(), "mask runs cover 1 slots, context has 2");
  EXPECT_EQ(ctl.forward(1, q + 999, prefill({1}, 0, pages, 1), nullptr), Status::BadHandle);
  EXPECT_EQ(ctl.forward(2, q, prefill({1}, 0, pages, 1), nullptr), Status::Terminated);
  // A good call still works afterwards.
  auto o = wait_for([&](CallCompletion c) {
    return ctl.forward(1, q, prefill({1, 2}, 0, pages, 2), std::move(c));
  });
  EXPECT_EQ(o.code(), Status::Ok) << o.message();
}

TEST(Controller, ContentionTerminatesNewestInstancesAndQuotasRefuse) {
  auto backend = small_fake(6);
  ControllerOptions opt;
  opt.kv_pressure = KvPressure::Kill;  // the paper's policy (kv_suspension_test: the default)
  Controller ctl(*backend, opt);
  std::promise<std::string> killed;
  ctl.register_instance(1, [](const std::string&) { ADD_FAILURE() << "oldest must survive"; });
  ctl.register_instance(2, [&](const std::string& why) { killed.set_value(why); });
  std::vector<uint32_t> p1, p2;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), p1), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_pages(2, 4), p2), Status::Ok);
  // The older instance needs 3 more pages: the newer one is terminated to make room.
  std::vector<uint32_t> more;
  ASSERT_EQ(into(ctl.alloc_pages(1, 3), more), Status::Ok);
  EXPECT_EQ(killed.get_future().get(), "KV memory needed by an older inferlet");
  EXPECT_EQ(ctl.gauges().instances_killed_for_memory, 1u);
  EXPECT_EQ(ctl.gauges().instances, 1u);
  // Nobody newer left: the newest instance itself is refused, not killed.
  ctl.register_instance(3, nullptr);
  EXPECT_EQ(into(ctl.alloc_pages(3, 5), more), Status::OutOfKvPages);

  auto backend2 = small_fake(8);
  ControllerOptions q;
  q.max_kv_pages_per_instance = 3;
  Controller ctl2(*backend2, q);
  ctl2.register_instance(1, nullptr);
  ASSERT_EQ(into(ctl2.alloc_pages(1, 3), p1), Status::Ok);
  EXPECT_EQ(into(ctl2.alloc_pages(1, 1), p2), Status::QuotaExceeded);
}

// A victim's queued calls complete as cancelled only after it was told it is killed: its guest,
// woken by the cancellation, must already be ending rather than report the cancellation as its
// own failure (a served request answered 500 "cancelled" instead of 503 with the kill's reason).
TEST(Controller, ContentionKillsTheVictimBeforeCancellingItsCalls) {
  auto backend = small_fake(6);
  ControllerOptions opt;
  opt.kv_pressure = KvPressure::Kill;
  opt.policy = "t:200";  // hold the victim's call in its queue while the older one allocates
  Controller ctl(*backend, opt);
  std::mutex mu;
  std::vector<std::string> order;
  auto note = [&](std::string what) {
    std::lock_guard lock(mu);
    order.push_back(std::move(what));
  };
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, [&](const std::string& why) { note("killed: " + why); });
  std::vector<uint32_t> p1, p2;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), p1), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_pages(2, 4), p2), Status::Ok);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(2), q), Status::Ok);
  std::promise<void> completed;
  ASSERT_EQ(ctl.forward(2, q, prefill({1, 2}, 0, {p2[0]}, 2),
                        [&](CallOutcome&& o) {
                          note(std::string("call: ") + status_name(o.code()));
                          completed.set_value();
                        }),
            Status::Ok);
  std::vector<uint32_t> more;
  ASSERT_EQ(into(ctl.alloc_pages(1, 3), more), Status::Ok);
  completed.get_future().wait();
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"killed: KV memory needed by an older inferlet",
                                             "call: terminated"}));
}

TEST(Controller, ReleasingAnInstanceFailsItsPendingCalls) {
  auto backend = small_fake(8);
  ControllerOptions opt;
  opt.policy = "t:200";  // hold calls long enough to release the instance first
  Controller ctl(*backend, opt);
  ctl.register_instance(1, nullptr);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 1), pages), Status::Ok);
  std::promise<CallOutcome> p;
  ASSERT_EQ(ctl.forward(1, q, prefill({1, 2}, 0, pages, 2),
                        [&](CallOutcome&& o) { p.set_value(std::move(o)); }),
            Status::Ok);
  ctl.release_instance(1);
  EXPECT_EQ(p.get_future().get().code(), Status::Terminated);
  EXPECT_EQ(ctl.gauges().pages_free, 8u);  // the queued call's reference went too
}

TEST(Controller, ChunkedPrefillMatchesWholePrefillAndRespectsBudget) {
  Engine engine(weights(), small_engine(16));
  ControllerOptions opt;
  opt.max_batch_tokens = 16;
  Controller ctl(engine, opt);
  std::vector<uint32_t> batch_tokens;
  std::mutex mu;
  ctl.set_batch_observer([&](const BatchStats& s) {
    std::lock_guard lock(mu);
    batch_tokens.push_back(s.tokens);
  });
  ctl.register_instance(1, nullptr);
  QueueId q;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 4), pages), Status::Ok);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 50; ++i) prompt.push_back(1 + (i * 37) % 997);
  auto make = [&](std::vector<uint32_t> pg) {
    SequenceInput s = prefill(prompt, 0, std::move(pg), 50 - 48);
    s.outputs = {
        {49, OutputKind::TopK, 5, 0}, {10, OutputKind::TopK, 5, 0}, {30, OutputKind::Logits, 0, 0}};
    // A non-causal row pattern: input 20 may not see slot 3 (checks mask truncation per chunk).
    s.mask.assign(50, {});
    for (uint32_t i = 0; i < 50; ++i) s.mask[i] = {i + 1, 50 - (i + 1)};
    s.mask[20] = {3, 1, 17, 29};
    return s;
  };
  auto got =
      wait_for([&](CallCompletion c) { return ctl.forward(1, q, make(pages), std::move(c)); });
  ASSERT_EQ(got.code(), Status::Ok) << got.message();
  {
    std::lock_guard lock(mu);
    ASSERT_GE(batch_tokens.size(), 4u);
    for (uint32_t t : batch_tokens) EXPECT_LE(t, 16u);
  }
  auto ref_pages = engine.kv_pool().allocate(4);
  auto ref = engine.forward({make(ref_pages)});
  ASSERT_EQ(got->forward.outputs.size(), 3u);
  for (int o : {0, 1}) {
    EXPECT_EQ(got->forward.outputs[o].dist.ids, ref[0].outputs[o].dist.ids) << o;
    for (size_t i = 0; i < 5; ++i)
      EXPECT_NEAR(got->forward.outputs[o].dist.probs[i], ref[0].outputs[o].dist.probs[i], 1e-5);
  }
  ASSERT_EQ(got->forward.outputs[2].logits.size(), ref[0].outputs[2].logits.size());
  for (size_t i = 0; i < ref[0].outputs[2].logits.size(); ++i)
    EXPECT_NEAR(got->forward.outputs[2].logits[i], ref[0].outputs[2].logits[i], 1e-4);
}

TEST(Controller, DecodesGoFirstWhilePrefillIsChunked) {
  auto backend = small_fake(32);
  ControllerOptions opt;
  opt.max_batch_tokens = 32;
  opt.policy = "k:2";  // hold until both calls are queued
  Controller ctl(*backend, opt);
  std::vector<BatchStats> batches;
  std::mutex mu;
  ctl.set_batch_observer([&](const BatchStats& s) {
    std::lock_guard lock(mu);
    batches.push_back(s);
  });
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  QueueId q1, q2;
  ASSERT_EQ(into(ctl.create_queue(1), q1), Status::Ok);
  ASSERT_EQ(into(ctl.create_queue(2), q2), Status::Ok);
  std::vector<uint32_t> p1, p2;
  ASSERT_EQ(into(ctl.alloc_pages(1, 7), p1), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_pages(2, 1), p2), Status::Ok);
  std::vector<int32_t> long_prompt(100, 7);
  std::promise<CallOutcome> long_done, decode_done;
  // The long prompt arrives first; the decode call must still run in the first batch.
  ASSERT_EQ(ctl.forward(1, q1, prefill(long_prompt, 0, p1, 100 - 6 * 16),
                        [&](CallOutcome&& o) { long_done.set_value(std::move(o)); }),
            Status::Ok);
  ASSERT_EQ(ctl.forward(2, q2, prefill({5}, 0, p2, 1),
                        [&](CallOutcome&& o) { decode_done.set_value(std::move(o)); }),
            Status::Ok);
  EXPECT_EQ(decode_done.get_future().get().code(), Status::Ok);
  EXPECT_EQ(long_done.get_future().get().code(), Status::Ok);
  std::lock_guard lock(mu);
  ASSERT_GE(batches.size(), 4u);      // 100 prefill tokens in a 32-token budget
  EXPECT_EQ(batches[0].calls, 2u);    // decode + the first prefill chunk
  EXPECT_EQ(batches[0].tokens, 32u);  // the chunk filled exactly what the decode left
}

// --itl-target-ms: once the controller has measured a forward's time per token, a batch with
// decode steps takes only the prefill tokens that fit the target (at least a page: a target
// this small gives exactly one page), while a prefill alone still uses the whole budget.
TEST(Controller, ItlTargetBoundsThePrefillBesideDecodes) {
  auto backend = small_fake(32);
  ControllerOptions opt;
  opt.max_batch_tokens = 512;
  opt.itl_target_ns = 1;
  opt.policy = "k:2";  // hold until both calls of a round are queued
  Controller ctl(*backend, opt);
  std::vector<BatchStats> batches;
  std::mutex mu;
  ctl.set_batch_observer([&](const BatchStats& s) {
    std::lock_guard lock(mu);
    batches.push_back(s);
  });
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  QueueId q1, q2;
  ASSERT_EQ(into(ctl.create_queue(1), q1), Status::Ok);
  ASSERT_EQ(into(ctl.create_queue(2), q2), Status::Ok);
  std::vector<uint32_t> p1, p2;
  ASSERT_EQ(into(ctl.alloc_pages(1, 14), p1), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_pages(2, 1), p2), Status::Ok);
  // Round 1: nothing measured yet, so the prompt runs whole beside the decode.
  // Round 2: the time per token is known; the decode's batch carries one page of the prompt.
  for (int round = 0; round < 2; ++round) {
    std::vector<int32_t> prompt(100, 7 + round);
    std::promise<CallOutcome> long_done, decode_done;
    const auto first = p1.begin() + 7 * round;
    ASSERT_EQ(ctl.forward(1, q1, prefill(prompt, 0, {first, first + 7}, 100 - 6 * 16),
                          [&](CallOutcome&& r) { long_done.set_value(std::move(r)); }),
              Status::Ok);
    ASSERT_EQ(ctl.forward(2, q2, prefill({5}, uint32_t(round), p2, uint32_t(round) + 1),
                          [&](CallOutcome&& r) { decode_done.set_value(std::move(r)); }),
              Status::Ok);
    ASSERT_EQ(decode_done.get_future().get().code(), Status::Ok);
    ASSERT_EQ(long_done.get_future().get().code(), Status::Ok);
    std::lock_guard lock(mu);
    ASSERT_FALSE(batches.empty());
    const BatchStats& b = batches.front();  // the decode and the prompt's first part
    EXPECT_EQ(b.decode_tokens, 1u) << "round " << round;
    EXPECT_EQ(b.prefill_tokens, round == 0 ? 100u : 16u) << "round " << round;
    batches.clear();
  }
}

TEST(Controller, PrefixCacheSharesPagesAndIsReclaimedUnderPressure) {
  auto backend = small_fake(8);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  QueueId q1;
  ASSERT_EQ(into(ctl.create_queue(1), q1), Status::Ok);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + i * 11);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 3), pages), Status::Ok);
  auto o = wait_for([&](CallCompletion c) {
    return ctl.forward(1, q1, prefill(prompt, 0, pages, 8), std::move(c));
  });
  ASSERT_EQ(o.code(), Status::Ok);
  ASSERT_EQ(ctl.prefix_insert(1, prompt, std::span(pages).first(2)), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_cached, 2u);

  // Instance 2 asks for the same prompt: two pages (32 tokens) come from the cache.
  std::vector<uint32_t> shared;
  size_t matched = 0;
  ASSERT_EQ(into(ctl.prefix_match(2, prompt), shared, matched), Status::Ok);
  EXPECT_EQ(matched, 32u);
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(ctl.gauges().prefix_hit_tokens, 32u);
  EXPECT_EQ(ctl.gauges().prefix_miss_tokens, 8u);

  // Its continuation from the cached pages equals the owner's full prefill.
  QueueId q2;
  ASSERT_EQ(into(ctl.create_queue(2), q2), Status::Ok);
  std::vector<uint32_t> tail;
  ASSERT_EQ(into(ctl.alloc_pages(2, 1), tail), Status::Ok);
  std::vector<uint32_t> table = shared;
  table.push_back(tail[0]);
  auto cont = wait_for([&](CallCompletion c) {
    return ctl.forward(
        2, q2, prefill(std::vector<int32_t>(prompt.begin() + 32, prompt.end()), 32, table, 8),
        std::move(c));
  });
  ASSERT_EQ(cont.code(), Status::Ok);
  EXPECT_EQ(cont->forward.outputs[0].dist.ids, o->forward.outputs[0].dist.ids);

  // Everyone lets go; the cache still holds 2 pages, and gives them back under pressure.
  ctl.release_instance(1);
  ctl.release_instance(2);
  EXPECT_EQ(ctl.gauges().pages_free, 6u);
  ctl.register_instance(3, nullptr);
  std::vector<uint32_t> all;
  ASSERT_EQ(into(ctl.alloc_pages(3, 8), all), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_cached, 0u);
}

TEST(Controller, PrefixCacheCanBeDisabled) {
  auto backend = small_fake(8);
  ControllerOptions opt;
  opt.prefix_cache = false;
  Controller ctl(*backend, opt);
  ctl.register_instance(1, nullptr);
  std::vector<uint32_t> pages, got;
  ASSERT_EQ(into(ctl.alloc_pages(1, 1), pages), Status::Ok);
  std::vector<int32_t> prompt(16, 5);
  ASSERT_EQ(ctl.prefix_insert(1, prompt, pages), Status::Ok);
  size_t matched = 99;
  ASSERT_EQ(into(ctl.prefix_match(1, prompt), got, matched), Status::Ok);
  EXPECT_EQ(matched, 0u);
  EXPECT_TRUE(got.empty());
}

TEST(Controller, BackendFailuresKeepTheirCodeAndMessage) {
  auto backend = small_fake(8);
  Controller ctl(*backend, {});
  ctl.register_instance(1, nullptr);
  QueueId q = 0;
  ASSERT_EQ(into(ctl.create_queue(1), q), Status::Ok);
  std::vector<uint32_t> pages, embeds;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), pages), Status::Ok);
  ASSERT_EQ(into(ctl.alloc_embeds(1, 2), embeds), Status::Ok);

  // Out of memory in the backend is not the caller's fault: BackendFailure, with the reason.
  backend->fail_call(FakeHandler::EmbedTokens, 1, FakeFailure::OutOfMemory);
  auto oom = wait_for([&](CallCompletion c) {
    return ctl.embed_tokens(1, q, {5, 6}, {0, 1}, embeds, std::move(c));
  });
  EXPECT_EQ(oom, Status::BackendFailure);
  EXPECT_NE(oom.message().find("out of memory"), std::string::npos) << oom.message();

  // A request the backend rejects (pith::Error) is a bad argument, with the backend's message.
  backend->fail_call(FakeHandler::CopyKv, 1, FakeFailure::Error);
  auto rejected = wait_for([&](CallCompletion c) {
    return ctl.copy_kv(1, q, pages[0], pages[1], 0, 0, 4, std::move(c));
  });
  EXPECT_EQ(rejected, Status::BadArgument);
  EXPECT_FALSE(rejected.message().empty());

  // The queue goes on.
  auto ok = wait_for([&](CallCompletion c) {
    return ctl.embed_tokens(1, q, {5, 6}, {0, 1}, embeds, std::move(c));
  });
  EXPECT_EQ(ok, Status::Ok) << ok;
}

TEST(Controller, EveryRejectionSaysWhy) {
  auto backend = small_fake(4);
  ControllerOptions opt;
  opt.max_kv_pages_per_instance = 3;
  Controller ctl(*backend, opt);
  ctl.register_instance(1, nullptr);
  std::vector<uint32_t> pages;
  ASSERT_EQ(into(ctl.alloc_pages(1, 2), pages), Status::Ok);
  auto quota = ctl.alloc_pages(1, 2);
  EXPECT_EQ(quota, Status::QuotaExceeded);
  EXPECT_NE(quota.message().find("quota 3"), std::string::npos) << quota;
  auto foreign = ctl.dealloc_pages(1, std::vector<uint32_t>{77});
  EXPECT_EQ(foreign, Status::BadHandle);
  EXPECT_EQ(foreign.message(), "page handle 77");
  auto missing = ctl.import_pages(1, "nothing");
  EXPECT_EQ(missing, Status::NotFound);
  EXPECT_EQ(missing.message(), "no export 'nothing'");
  auto gone = ctl.create_queue(9);
  EXPECT_EQ(gone, Status::Terminated);
  EXPECT_EQ(gone.message(), "unknown instance");
  auto no_queue = ctl.next_dist(1, 12345, 1, 5, nullptr);
  EXPECT_EQ(no_queue, Status::BadHandle);
  EXPECT_EQ(no_queue.message(), "unknown queue 12345");
}

}  // namespace pith
