// KV pressure under the suspend policy (control/contention_policy.h, kv_suspension.cpp): waiting
// allocations, suspension of outranked and idle instances to host memory, resumption with their
// K/V and queued calls intact, refusals, and the pure ordering rules. On the weightless
// FakeBackend, whose "KV" records what each slot holds, so a resumed instance's outputs show
// whether its pages came back.
#include <gtest/gtest.h>

#include <thread>
#include "control/contention_policy.h"

#include "kv_pressure_helpers.h"

namespace pith {
namespace {

TEST(KvSuspension, AnOutrankedInstanceIsSwappedOutAndComesBackWithItsKv) {
  auto backend = fake(6);
  Controller ctl(*backend, {});
  Waker w1, w2;
  ctl.register_instance(1, [](const std::string&) { ADD_FAILURE() << "no one is killed"; });
  ctl.register_instance(2, [](const std::string&) { ADD_FAILURE() << "no one is killed"; });
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  QueueId q2 = *ctl.create_queue(2);

  auto p1 = alloc(ctl, 1, 2);
  auto p2 = alloc(ctl, 2, 4);
  ASSERT_EQ(run(ctl, 2, q2, prompt(context_of(2), 0, {p2[0], p2[1], p2[2]}, 4)).code(), Status::Ok);

  // The older instance needs 3 more pages; only 0 are free. It waits, the newer one is suspended
  // (all 4 of its pages are private), and the older one is granted and woken.
  auto more = alloc_waiting(ctl, 1, 3, w1);
  ASSERT_TRUE(more.ok()) << more;
  auto g = ctl.gauges();
  EXPECT_EQ(g.suspensions, 1u);
  EXPECT_EQ(g.instances_suspended, 1u);
  EXPECT_EQ(g.pages_swapped_out, 4u);
  EXPECT_EQ(g.swap_bytes, 4 * backend->kv_page_bytes());
  EXPECT_EQ(g.instances_killed_for_memory, 0u);

  // While suspended, its calls that touch pages wait; the rest of its handles stay valid.
  EXPECT_EQ(ctl.forward(2, q2, prompt({7}, 12, p2, 1), nullptr), Status::Waiting);
  EXPECT_EQ(ctl.dealloc_pages(2, p2), Status::Waiting);
  EXPECT_TRUE(ctl.has_page(2, p2[3]));

  // The older one lets go: the newer one is resumed (woken) into fresh pages.
  ctl.release_instance(1);
  ASSERT_TRUE(w2.wait_for(1));
  g = ctl.gauges();
  EXPECT_EQ(g.resumes, 1u);
  EXPECT_EQ(g.instances_suspended, 0u);
  EXPECT_EQ(g.swap_bytes, 0u);
  EXPECT_EQ(g.pages_swapped_in, 4u);

  // Its continuation is the one an unpressured instance computes over the same context.
  auto ref_backend = fake(6);
  Controller ref(*ref_backend, {});
  ref.register_instance(9, nullptr);
  QueueId rq = *ref.create_queue(9);
  auto rp = alloc(ref, 9, 4);
  ASSERT_EQ(run(ref, 9, rq, prompt(context_of(2), 0, {rp[0], rp[1], rp[2]}, 4)).code(), Status::Ok);
  auto expected = run(ref, 9, rq, prompt({7}, 12, rp, 1));
  auto got = run(ctl, 2, q2, prompt({7}, 12, p2, 1));
  ASSERT_TRUE(got.ok()) << got;
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(got->forward.outputs[0].dist.ids, expected->forward.outputs[0].dist.ids);
  EXPECT_EQ(got->forward.outputs[0].dist.probs, expected->forward.outputs[0].dist.probs);
  ctl.release_instance(2);
  EXPECT_EQ(ctl.gauges().pages_free, 6u);
}

TEST(KvSuspension, QueuedCallsOfASuspendedInstanceRunAfterItsResume) {
  auto backend = fake(6);
  ControllerOptions opt;
  opt.policy = "t:300";  // hold calls in their queues long enough to be suspended with them
  Controller ctl(*backend, opt);
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  QueueId q2 = *ctl.create_queue(2);
  auto p2 = alloc(ctl, 2, 3);
  std::promise<CallOutcome> queued;
  ASSERT_EQ(ctl.forward(2, q2, prompt(context_of(5), 0, p2, 4),
                        [&](CallOutcome&& o) { queued.set_value(std::move(o)); }),
            Status::Ok);
  // Its queued call still holds the page it lets go of.
  ASSERT_EQ(ctl.dealloc_pages(2, std::vector<uint32_t>{p2[2]}), Status::Ok);
  // Instance 1 (older) takes the whole pool: instance 2 is suspended with its call queued.
  auto all = alloc_waiting(ctl, 1, 6, w1);
  ASSERT_TRUE(all.ok()) << all;
  EXPECT_EQ(ctl.gauges().pages_swapped_out, 3u);  // the handle-less page went too
  ASSERT_EQ(ctl.dealloc_pages(1, *all), Status::Ok);
  auto o = queued.get_future().get();
  ASSERT_TRUE(o.ok()) << o;

  auto ref_backend = fake(6);
  Controller ref(*ref_backend, {});
  ref.register_instance(9, nullptr);
  QueueId rq = *ref.create_queue(9);
  auto rp = alloc(ref, 9, 3);
  auto expected = run(ref, 9, rq, prompt(context_of(5), 0, rp, 4));
  EXPECT_EQ(o->forward.outputs[0].dist.ids, expected->forward.outputs[0].dist.ids);
  EXPECT_EQ(ctl.gauges().resumes, 1u);
}

TEST(KvSuspension, SharedPagesStayAndOnlyPrivateOnesAreSwapped) {
  auto backend = fake(6);
  Controller ctl(*backend, {});
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  auto p2 = alloc(ctl, 2, 3);
  ASSERT_EQ(ctl.export_pages(2, "shared", std::span(p2).first(2), /*persistent=*/true), Status::Ok);
  auto p1 = alloc(ctl, 1, 2);
  // 1 free; instance 1 wants 2: only instance 2's unexported page can go.
  auto more = alloc_waiting(ctl, 1, 2, w1);
  ASSERT_TRUE(more.ok()) << more;
  EXPECT_EQ(ctl.gauges().pages_swapped_out, 1u);
  ctl.release_instance(1);
  ASSERT_TRUE(w2.wait_for(1));
  EXPECT_EQ(ctl.gauges().resumes, 1u);
  ctl.release_instance(2);
  ASSERT_EQ(ctl.remove_export("shared"), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_free, 6u);
}

TEST(KvSuspension, NewcomersWaitBehindBetterRankedWaiters) {
  auto backend = fake(4);
  Controller ctl(*backend, {});
  Waker w1, w2, w3;
  for (InstanceId id : {1, 2, 3}) ctl.register_instance(id, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  ctl.set_waker(3, w3.fn());
  // Instance 1 holds 3 pages; it called just now, so it is not idle (the default is a second).
  auto p1 = alloc(ctl, 1, 3);
  // Instance 2 asks for 2: it cannot suspend the older instance 1, so it waits...
  EXPECT_EQ(ctl.alloc_pages(2, 2).code(), Status::Waiting);
  EXPECT_EQ(ctl.gauges().kv_waiting, 1u);
  // ...and instance 3 (newer still) cannot take the one free page past it.
  EXPECT_EQ(ctl.alloc_pages(3, 1).code(), Status::Waiting);
  EXPECT_EQ(ctl.gauges().kv_waiting, 2u);
  // Pages come back: instance 2 goes first, then instance 3.
  ASSERT_EQ(ctl.dealloc_pages(1, p1), Status::Ok);
  ASSERT_TRUE(w2.wait_for(1));
  ASSERT_TRUE(w3.wait_for(1));
  EXPECT_EQ(ctl.alloc_pages(2, 2).code(), Status::Ok);
  EXPECT_EQ(ctl.alloc_pages(3, 1).code(), Status::Ok);
  auto g = ctl.gauges();
  EXPECT_EQ(g.kv_waiting, 0u);
  EXPECT_EQ(g.suspensions, 0u);
  EXPECT_GT(g.kv_wait_ns, 0u);
}

TEST(KvSuspension, IdleInstancesGiveWayWhateverTheirRank) {
  auto backend = fake(4);
  ControllerOptions opt;
  opt.idle_suspend_ns = 20'000'000;  // 20 ms
  Controller ctl(*backend, opt);
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  auto p1 = alloc(ctl, 1, 4);  // the older instance then waits for its user, holding the pool
  auto p2 = alloc_waiting(ctl, 2, 2, w2);
  ASSERT_TRUE(p2.ok()) << p2;
  EXPECT_EQ(ctl.gauges().suspensions, 1u);
  // When it calls again it waits to be resumed, which happens once the pages are back.
  EXPECT_EQ(ctl.dealloc_pages(1, p1), Status::Waiting);
  ctl.release_instance(2);
  ASSERT_TRUE(w1.wait_for(1));
  EXPECT_EQ(ctl.dealloc_pages(1, p1), Status::Ok);
  EXPECT_EQ(ctl.gauges().pages_free, 4u);
}

TEST(KvSuspension, WhatCannotEverFitIsRefusedWithTheReason) {
  auto backend = fake(4);
  Controller ctl(*backend, {});
  Waker w1;
  ctl.register_instance(1, nullptr);
  ctl.set_waker(1, w1.fn());
  auto r = ctl.alloc_pages(1, 5);
  EXPECT_EQ(r.code(), Status::OutOfKvPages);
  EXPECT_NE(r.message().find("the whole pool has 4"), std::string::npos) << r;
  // Holding 3, it asks for 2 more: nobody else holds anything it could wait for.
  auto p = alloc(ctl, 1, 3);
  auto more = alloc_waiting(ctl, 1, 2, w1);
  EXPECT_EQ(more.code(), Status::OutOfKvPages);
  EXPECT_NE(more.message().find("more than the pool of 4 can give"), std::string::npos) << more;
  EXPECT_EQ(ctl.gauges().kv_refused, 1u);
  EXPECT_EQ(ctl.alloc_pages(1, 1).code(), Status::Ok);  // what fits still does
}

// Pages reserved for a granted wait are held as soon as their instance takes them (and it may
// be suspended then): someone who needs pages meanwhile waits, and is not refused as if it alone
// wanted more than the pool.
TEST(KvSuspension, PagesGrantedToAnotherAreWaitedForNotRefused) {
  auto backend = fake(4);
  Controller ctl(*backend, {});
  Waker w1, w2, w3;
  for (InstanceId id : {1, 2, 3}) ctl.register_instance(id, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  ctl.set_waker(3, w3.fn());
  auto oldest = alloc(ctl, 1, 1);
  auto newest = alloc(ctl, 3, 2);
  // Instance 2 asks for 3: the newest is suspended for it and the 3 pages are reserved for it.
  EXPECT_EQ(ctl.alloc_pages(2, 3).code(), Status::Waiting);
  ASSERT_TRUE(w2.wait_for(1));
  EXPECT_EQ(ctl.gauges().suspensions, 1u);
  // Before instance 2 takes them, the oldest asks for one more.
  EXPECT_EQ(ctl.alloc_pages(1, 1).code(), Status::Waiting);
  std::this_thread::sleep_for(100ms);  // the dispatcher walks the waiters meanwhile
  EXPECT_EQ(ctl.gauges().kv_refused, 0u);
  auto granted = ctl.alloc_pages(2, 3);
  ASSERT_TRUE(granted.ok()) << granted;
  // Instance 2 now holds them; the oldest outranks it and gets its page.
  ASSERT_TRUE(w1.wait_for(1));
  EXPECT_EQ(ctl.alloc_pages(1, 1).code(), Status::Ok);
  EXPECT_EQ(ctl.gauges().kv_refused, 0u);
}

TEST(KvSuspension, FailFastAndUnwakeableInstancesDoNotWait) {
  auto backend = fake(4);
  Controller ctl(*backend, {});
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.register_instance(3, nullptr);  // no waker: never waits, never suspended
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  ctl.set_fail_fast(2, true);
  auto p3 = alloc(ctl, 3, 3);
  auto r = ctl.alloc_pages(2, 2);
  EXPECT_EQ(r.code(), Status::OutOfKvPages);
  EXPECT_NE(r.message().find("fails fast"), std::string::npos) << r;
  EXPECT_EQ(ctl.alloc_pages(3, 2).code(), Status::OutOfKvPages);
  EXPECT_EQ(ctl.gauges().suspensions, 0u);
}

TEST(KvSuspension, KillingASuspendedInstanceFreesEverything) {
  auto backend = fake(4);
  ControllerOptions opt;
  opt.policy = "t:300";
  Controller ctl(*backend, opt);
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  QueueId q2 = *ctl.create_queue(2);
  auto p2 = alloc(ctl, 2, 3);
  std::promise<CallOutcome> queued;
  ASSERT_EQ(ctl.forward(2, q2, prompt(context_of(1), 0, p2, 4),
                        [&](CallOutcome&& o) { queued.set_value(std::move(o)); }),
            Status::Ok);
  auto p1 = alloc_waiting(ctl, 1, 4, w1);
  ASSERT_TRUE(p1.ok()) << p1;
  EXPECT_EQ(ctl.gauges().instances_suspended, 1u);
  ctl.release_instance(2);
  EXPECT_EQ(queued.get_future().get().code(), Status::Terminated);
  auto g = ctl.gauges();
  EXPECT_EQ(g.instances_suspended, 0u);
  EXPECT_EQ(g.swap_bytes, 0u);
  ctl.release_instance(1);
  EXPECT_EQ(ctl.gauges().pages_free, 4u);
}

TEST(KvSuspension, AResumeThatCannotLoadEndsTheInstanceWithTheReason) {
  auto backend = fake(4);
  Controller ctl(*backend, {});
  Waker w1, w2;
  std::promise<std::string> killed;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, [&](const std::string& why) { killed.set_value(why); });
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  auto p2 = alloc(ctl, 2, 3);
  auto p1 = alloc_waiting(ctl, 1, 4, w1);
  ASSERT_TRUE(p1.ok()) << p1;
  backend->fail_call(FakeHandler::LoadKv, 1);
  ctl.release_instance(1);  // the resume's load fails: instance 2 cannot get its K/V back
  auto why = killed.get_future().get();
  EXPECT_NE(why.find("could not be restored after a suspension"), std::string::npos) << why;
  EXPECT_NE(why.find("injected failure of this load_kv_pages call"), std::string::npos) << why;
  auto g = ctl.gauges();
  EXPECT_EQ(g.instances, 0u);
  EXPECT_EQ(g.pages_free, 4u);
  EXPECT_EQ(g.swap_bytes, 0u);
}

TEST(KvSuspension, SwapSpaceIsBounded) {
  auto backend = fake(4);
  ControllerOptions opt;
  opt.swap_bytes = backend->kv_page_bytes();  // room for one page image only
  Controller ctl(*backend, opt);
  Waker w1, w2;
  ctl.register_instance(1, nullptr);
  ctl.register_instance(2, nullptr);
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  auto p2 = alloc(ctl, 2, 3);
  auto p1 = alloc(ctl, 1, 1);
  // Instance 2's 3 pages do not fit in the swap space: instance 1 waits instead.
  EXPECT_EQ(ctl.alloc_pages(1, 2).code(), Status::Waiting);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ctl.gauges().suspensions, 0u);
  ASSERT_EQ(ctl.dealloc_pages(2, p2), Status::Ok);
  ASSERT_TRUE(w1.wait_for(1));
  EXPECT_EQ(ctl.alloc_pages(1, 2).code(), Status::Ok);
}

TEST(KvSuspensionPolicy, OrderIsIdleFirstThenLowestRank) {
  std::vector<SuspendCandidate> c = {
      {1, {0, 1}, 4, -1},         // oldest, busy: the requester (seq 2) does not outrank it
      {3, {0, 3}, 2, -1},         // newer
      {4, {0, 4}, 2, -1},         // newest
      {5, {2, 5}, 2, -1},         // newest but higher priority
      {6, {0, 6}, 0, -1},         // holds nothing private
      {7, {0, 0}, 1, 5'000'000},  // idle 5 ms, older than everyone
  };
  EXPECT_EQ(suspension_order(c, KvRank{0, 2}, 1'000'000), (std::vector<uint64_t>{7, 4, 3}));
  EXPECT_EQ(suspension_order(c, KvRank{3, 9}, 0), (std::vector<uint64_t>{4, 3, 1, 7, 5}));
  EXPECT_TRUE(outranks({1, 9}, {0, 1}));
  EXPECT_TRUE(outranks({0, 1}, {0, 2}));
  EXPECT_FALSE(outranks({0, 2}, {0, 2}));
}

}  // namespace
}  // namespace pith
