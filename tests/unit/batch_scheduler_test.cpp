#include "control/batch_scheduler.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "control/dispatch_policy.h"

namespace pith {

namespace {

CallInfo call(uint64_t id, CallType type, int64_t t, uint32_t tokens = 1,
              std::vector<uint32_t> reads = {}, std::vector<uint32_t> writes = {}) {
  CallInfo c;
  c.id = id;
  c.type = type;
  c.enqueued_ns = t;
  c.n_tokens = tokens;
  c.reads = std::move(reads);
  c.writes = std::move(writes);
  return c;
}

using Takes = std::vector<QueueTake>;

}  // namespace

TEST(BatchScheduler, EmptyQueuesGiveEmptyPlan) {
  std::vector<CallInfo> none;
  std::vector<QueueView> qs{{1, 0, none}, {2, 0, none}};
  EXPECT_TRUE(form_batch(qs, {}).empty());
  EXPECT_EQ(count_eligible(qs), 0u);
}

TEST(BatchScheduler, HorizontalBatchingGroupsSameTypeHeadsAcrossQueues) {
  std::vector<CallInfo> a{call(1, CallType::Forward, 10)};
  std::vector<CallInfo> b{call(2, CallType::Forward, 20)};
  std::vector<CallInfo> c{call(3, CallType::NextDist, 30)};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}, {3, 0, c}};
  auto plan = form_batch(qs, {});
  EXPECT_EQ(plan.type, CallType::Forward);
  EXPECT_EQ(plan.takes, (Takes{{1, 1}, {2, 1}}));
  EXPECT_EQ(plan.n_calls, 2u);
}

TEST(BatchScheduler, PicksTypeWhoseOldestCallWaitedLongest) {
  std::vector<CallInfo> a{call(1, CallType::Forward, 50)};
  std::vector<CallInfo> b{call(2, CallType::Forward, 60)};
  std::vector<CallInfo> c{call(3, CallType::NextDist, 5)};  // oldest overall
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}, {3, 0, c}};
  auto plan = form_batch(qs, {});
  EXPECT_EQ(plan.type, CallType::NextDist);
  EXPECT_EQ(plan.takes, (Takes{{3, 1}}));
}

TEST(BatchScheduler, OnlyQueueHeadsAreEligible) {
  // Queue 1's second call is a Forward, but its head is NextDist: the forward batch must not
  // jump ahead of it (calls on one queue execute in order).
  std::vector<CallInfo> a{call(1, CallType::NextDist, 100), call(2, CallType::Forward, 101)};
  std::vector<CallInfo> b{call(3, CallType::Forward, 1)};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}};
  auto plan = form_batch(qs, {});
  EXPECT_EQ(plan.type, CallType::Forward);
  EXPECT_EQ(plan.takes, (Takes{{2, 1}}));
}

TEST(BatchScheduler, VerticalBatchingTakesNonConflictingSuccessors) {
  // Three forwards on one queue writing distinct pages and reading only a shared prefix page.
  std::vector<CallInfo> a{
      call(1, CallType::Forward, 1, 4, {9}, {1}), call(2, CallType::Forward, 2, 4, {9}, {2}),
      call(3, CallType::Forward, 3, 4, {9}, {3}), call(4, CallType::NextDist, 4)};
  std::vector<QueueView> qs{{1, 0, a}};
  auto plan = form_batch(qs, {});
  EXPECT_EQ(plan.takes, (Takes{{1, 3}}));
  EXPECT_EQ(plan.n_tokens, 12u);
}

TEST(BatchScheduler, VerticalBatchingStopsAtConflicts) {
  // Second call writes the page the first writes: stop after one.
  std::vector<CallInfo> ww{call(1, CallType::Forward, 1, 1, {}, {5}),
                           call(2, CallType::Forward, 2, 1, {}, {5})};
  // Second call reads the page the first writes (it needs its K/V): stop after one.
  std::vector<CallInfo> rw{call(3, CallType::Forward, 1, 1, {}, {6}),
                           call(4, CallType::Forward, 2, 1, {6}, {7})};
  // Second call writes a page the first reads.
  std::vector<CallInfo> wr{call(5, CallType::Forward, 1, 1, {8}, {9}),
                           call(6, CallType::Forward, 2, 1, {}, {8})};
  for (auto* q : {&ww, &rw, &wr}) {
    std::vector<QueueView> qs{{1, 0, *q}};
    EXPECT_EQ(form_batch(qs, {}).takes, (Takes{{1, 1}}));
  }
}

TEST(BatchScheduler, HigherPriorityQueuesGoFirstAndTailIsCut) {
  std::vector<CallInfo> low{call(1, CallType::Forward, 1, 100)};
  std::vector<CallInfo> high{call(2, CallType::Forward, 5, 100)};
  std::vector<CallInfo> mid{call(3, CallType::Forward, 3, 100)};
  std::vector<QueueView> qs{{1, 0, low}, {2, 9, high}, {3, 5, mid}};
  BatchLimits lim;
  lim.max_tokens = 250;  // room for two of the three
  auto plan = form_batch(qs, lim);
  EXPECT_EQ(plan.takes, (Takes{{2, 1}, {3, 1}}));
  EXPECT_EQ(plan.n_tokens, 200u);
}

TEST(BatchScheduler, SequenceAndCallLimits) {
  std::vector<CallInfo> a{call(1, CallType::Forward, 1)}, b{call(2, CallType::Forward, 2)},
      c{call(3, CallType::Forward, 3)};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}, {3, 0, c}};
  BatchLimits lim;
  lim.max_seqs = 2;
  EXPECT_EQ(form_batch(qs, lim).n_calls, 2u);
  EagerPolicy eager;
  EXPECT_EQ(form_batch(qs, eager.limit({})).n_calls, 1u);
}

TEST(BatchScheduler, OversizedLoneCallStillRuns) {
  std::vector<CallInfo> a{call(1, CallType::Forward, 1, 5000)};
  std::vector<QueueView> qs{{1, 0, a}};
  BatchLimits lim;
  lim.max_tokens = 512;
  EXPECT_EQ(form_batch(qs, lim).n_calls, 1u);
}

TEST(DispatchPolicy, Decisions) {
  auto state = [](size_t n, int64_t waited, size_t returning = 0, int64_t since = 0,
                  int64_t backend = 0) {
    DispatchState s;
    s.n_eligible = n;
    s.oldest_wait_ns = waited;
    s.returning = returning;
    s.since_last_batch_ns = since;
    s.last_backend_ns = backend;
    return s;
  };
  AdaptivePolicy adaptive;
  EXPECT_TRUE(adaptive.decide(state(1, 0)).dispatch);
  // Callers of the last batch are still coming back: wait, bounded by a quarter of its time.
  auto d =
      adaptive.decide(state(3, 0, /*returning=*/5, /*since=*/1'000'000, /*backend=*/20'000'000));
  EXPECT_FALSE(d.dispatch);
  EXPECT_EQ(d.recheck_after_ns, 4'000'000);
  EXPECT_TRUE(adaptive.decide(state(3, 0, 5, 5'000'000, 20'000'000)).dispatch);
  EXPECT_TRUE(adaptive.decide(state(3, 0, 5, 5'000'000, 400'000'000)).dispatch);  // 5 ms cap
  EagerPolicy eager;
  EXPECT_TRUE(eager.decide(state(1, 0, 5, 0, 20'000'000)).dispatch);
  CountPolicy k(4, 1'000'000);
  EXPECT_FALSE(k.decide(state(3, 10)).dispatch);
  EXPECT_TRUE(k.decide(state(4, 10)).dispatch);
  EXPECT_TRUE(k.decide(state(1, 1'000'000)).dispatch);  // waited long enough
  TimePolicy t(5'000'000);
  d = t.decide(state(100, 1'000'000));
  EXPECT_FALSE(d.dispatch);
  EXPECT_EQ(d.recheck_after_ns, 4'000'000);
  EXPECT_TRUE(t.decide(state(1, 5'000'000)).dispatch);
}

TEST(DispatchPolicy, ParsesSpecs) {
  EXPECT_STREQ(make_dispatch_policy("adaptive")->name(), "adaptive");
  EXPECT_STREQ(make_dispatch_policy("eager")->name(), "eager");
  EXPECT_STREQ(make_dispatch_policy("k:16")->name(), "k");
  EXPECT_STREQ(make_dispatch_policy("t:2.5")->name(), "t");
  EXPECT_THROW(make_dispatch_policy("fastest"), Error);
  EXPECT_THROW(make_dispatch_policy("k:-3"), Error);
  EXPECT_THROW(make_dispatch_policy("t:abc"), Error);
}

TEST(BatchScheduler, ChunkingSplitsTheCallThatOverflowsTheBudget) {
  auto long_call = call(1, CallType::Forward, 1, 1000);
  long_call.splittable = true;
  std::vector<CallInfo> a{long_call};
  std::vector<CallInfo> b{call(2, CallType::Forward, 2, 1)}, c{call(3, CallType::Forward, 3, 1)};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}, {3, 0, c}};
  BatchLimits lim;
  lim.max_tokens = 512;
  // Decode-first: both decodes, then 510 tokens of the prompt.
  auto plan = form_batch(qs, lim);
  EXPECT_EQ(plan.takes, (Takes{{2, 1, 0}, {3, 1, 0}, {1, 0, 510}}));
  EXPECT_EQ(plan.n_tokens, 512u);
  // FCFS: the prompt arrived first and takes the whole budget; the decodes wait.
  lim.formation = BatchFormation::Fcfs;
  plan = form_batch(qs, lim);
  EXPECT_EQ(plan.takes, (Takes{{1, 0, 512}}));
  // Unlimited budget: no chunking, everything runs.
  plan = form_batch(qs, {});
  EXPECT_EQ(plan.n_tokens, 1002u);
}

TEST(BatchScheduler, ShortPrefillsGoBeforeLongOnesWithAThreshold) {
  auto long_call = call(1, CallType::Forward, 1, 4000);
  long_call.splittable = true;
  std::vector<CallInfo> a{long_call};
  auto short_call = call(2, CallType::Forward, 2, 50);
  short_call.splittable = true;
  std::vector<CallInfo> b{short_call};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}};
  BatchLimits lim;
  lim.max_tokens = 512;
  // Pure FCFS among prefills: the long prompt (older) takes the whole budget.
  EXPECT_EQ(form_batch(qs, lim).takes, (Takes{{1, 0, 512}}));
  // With a threshold the short prompt runs now and the long one gets the rest.
  lim.long_prefill_threshold = 128;
  EXPECT_EQ(form_batch(qs, lim).takes, (Takes{{2, 1, 0}, {1, 0, 462}}));
}

// With decodes in the batch, the batch holds at most tokens_with_decodes, the decodes' own
// tokens included (the ITL bound); without decodes the whole budget is the prefill's.
TEST(BatchScheduler, PrefillBesideDecodesIsCappedByTheAllowance) {
  auto long_call = call(1, CallType::Forward, 1, 1000);
  long_call.splittable = true;
  std::vector<CallInfo> a{long_call};
  std::vector<CallInfo> b{call(2, CallType::Forward, 2, 1)}, c{call(3, CallType::Forward, 3, 1)};
  std::vector<QueueView> qs{{1, 0, a}, {2, 0, b}, {3, 0, c}};
  BatchLimits lim;
  lim.max_tokens = 512;
  lim.tokens_with_decodes = 66;
  EXPECT_EQ(form_batch(qs, lim).takes, (Takes{{2, 1, 0}, {3, 1, 0}, {1, 0, 64}}));
  std::vector<QueueView> alone{{1, 0, a}};
  EXPECT_EQ(form_batch(alone, lim).takes, (Takes{{1, 0, 512}}));
  // Without a token budget the allowance still bounds the prefill beside decodes.
  lim.max_tokens = 0;
  EXPECT_EQ(form_batch(qs, lim).takes, (Takes{{2, 1, 0}, {3, 1, 0}, {1, 0, 64}}));
  // A short prompt that fits the allowance runs whole.
  auto short_call = call(4, CallType::Forward, 4, 40);
  short_call.splittable = true;
  std::vector<CallInfo> d{short_call};
  std::vector<QueueView> qs2{{2, 0, b}, {4, 0, d}};
  lim.max_tokens = 512;
  EXPECT_EQ(form_batch(qs2, lim).takes, (Takes{{2, 1, 0}, {4, 1, 0}}));
  // Decodes that use up the bound still leave the prefill its minimum.
  lim.tokens_with_decodes = 2;
  lim.min_prefill_with_decodes = 16;
  EXPECT_EQ(form_batch(qs, lim).takes, (Takes{{2, 1, 0}, {3, 1, 0}, {1, 0, 16}}));
}

}  // namespace pith
