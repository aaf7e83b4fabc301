// Recompute preemption (control/kv_provenance.h, kv_suspension.cpp): which writes leave a page a
// recipe, which pages can be dropped at suspension, the forwards that rebuild them, and
// suspended instances that come back with the same K/V (on the FakeBackend, whose K/V records
// each slot's input and position, and on the real engine with the tiny test model, whose logits
// after a recompute must match an unpressured run's).
#include <gtest/gtest.h>

#include <cmath>

#include "control/kv_provenance.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "kv_pressure_helpers.h"

namespace pith {
namespace {

// ---------------------------------------------------------------- recipes (page size 4)

SequenceInput tokens_at(std::vector<int32_t> tokens, uint32_t first_pos,
                        std::vector<uint32_t> pages, uint32_t last_len) {
  SequenceInput s = prompt(std::move(tokens), first_pos, std::move(pages), last_len);
  s.outputs.clear();
  return s;
}

std::vector<int32_t> iota_tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(KvProvenance, CausalTokenWritesLeaveRecipesThatAppendAndTruncate) {
  KvProvenance pv(8, 4, 4);
  pv.on_forward(tokens_at(iota_tokens(1, 6), 0, {0, 1}, 2));
  ASSERT_NE(pv.recipe(0), nullptr);
  EXPECT_EQ(pv.recipe(0)->tokens, iota_tokens(1, 4));
  EXPECT_EQ(pv.recipe(0)->positions, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pv.recipe(0)->context, nullptr);
  ASSERT_NE(pv.recipe(1), nullptr);
  EXPECT_EQ(pv.recipe(1)->tokens, (std::vector<int32_t>{5, 6}));
  ASSERT_NE(pv.recipe(1)->context, nullptr);
  EXPECT_EQ(pv.recipe(1)->context->page, 0u);
  EXPECT_EQ(pv.recipe(1)->context->version, pv.version(0));
  EXPECT_EQ(pv.recipe(1)->context->before, nullptr);

  pv.on_forward(tokens_at({7}, 6, {0, 1}, 3));  // a decode step appends
  EXPECT_EQ(pv.recipe(1)->tokens, (std::vector<int32_t>{5, 6, 7}));
  pv.on_forward(tokens_at({9}, 5, {0, 1}, 2));  // rejected drafts: rewritten from slot 1
  EXPECT_EQ(pv.recipe(1)->tokens, (std::vector<int32_t>{5, 9}));
  EXPECT_EQ(pv.recipe(1)->positions, (std::vector<uint32_t>{4, 5}));
  pv.on_forward(tokens_at({10}, 7, {0, 1}, 4));  // slot 3 while 2 are filled: a gap
  EXPECT_EQ(pv.recipe(1), nullptr);
  EXPECT_NE(pv.recipe(0), nullptr);  // untouched

  // The same page over another context (the table changed under it) is opaque too.
  pv.on_forward(tokens_at({1, 2}, 0, {2}, 2));
  pv.on_forward(tokens_at({3}, 2, {2}, 3));
  ASSERT_NE(pv.recipe(2), nullptr);
  pv.on_forward(tokens_at({4}, 7, {0, 2}, 4));  // page 2 slot 3, now after page 0
  EXPECT_EQ(pv.recipe(2), nullptr);
}

TEST(KvProvenance, MasksAdaptersCopiesAndUnknownEmbedsLeavePagesOpaque) {
  KvProvenance pv(8, 4, 4);
  SequenceInput masked = tokens_at({1, 2}, 0, {0}, 2);
  masked.mask = {{1, 1}, {2}};
  pv.on_forward(masked);
  EXPECT_EQ(pv.recipe(0), nullptr);

  SequenceInput adapted = tokens_at({1, 2}, 0, {1}, 2);
  adapted.adapter = 3;
  pv.on_forward(adapted);
  EXPECT_EQ(pv.recipe(1), nullptr);

  pv.on_forward(tokens_at({1, 2}, 0, {2}, 2));
  ASSERT_NE(pv.recipe(2), nullptr);
  const uint64_t v = pv.version(2);
  pv.on_opaque_write(2);  // copy_kv into it
  EXPECT_EQ(pv.recipe(2), nullptr);
  EXPECT_GT(pv.version(2), v);

  // Embeds filled by embed_tokens carry their tokens; a never-filled one does not.
  pv.on_embed_tokens(std::vector<int32_t>{11, 12}, std::vector<uint32_t>{0, 1});
  SequenceInput by_embeds;
  by_embeds.embed_slots = {0, 1};
  by_embeds.positions = {0, 1};
  by_embeds.kv_pages = {3};
  by_embeds.last_page_len = 2;
  by_embeds.outputs.push_back({1, OutputKind::Embed, 0, 0});  // overwrites slot 0 afterwards
  pv.on_forward(by_embeds);
  ASSERT_NE(pv.recipe(3), nullptr);
  EXPECT_EQ(pv.recipe(3)->tokens, (std::vector<int32_t>{11, 12}));
  by_embeds.kv_pages = {4};
  by_embeds.outputs.clear();
  pv.on_forward(by_embeds);  // slot 0 now holds a hidden state
  EXPECT_EQ(pv.recipe(4), nullptr);
  by_embeds.embed_slots = {2, 1};
  by_embeds.kv_pages = {5};
  pv.on_forward(by_embeds);  // slot 2 was never filled
  EXPECT_EQ(pv.recipe(5), nullptr);
}

TEST(KvProvenance, APageIsReplayableWhileItsContextIsUnchangedAndComesBack) {
  KvProvenance pv(8, 4, 4);
  pv.on_forward(tokens_at(iota_tokens(1, 8), 0, {0, 1}, 4));
  pv.on_forward(tokens_at({9}, 8, {0, 1, 2}, 1));
  const std::vector<uint32_t> all{0, 1, 2};
  EXPECT_EQ(pv.replayable(all, all), (std::vector<bool>{true, true, true}));
  // Page 0 shared with someone else: it stays resident, the others recompute over it.
  EXPECT_EQ(pv.replayable(std::vector<uint32_t>{1, 2}, all), (std::vector<bool>{true, true}));
  // Page 0 no longer held: it may be reused while the instance is away.
  EXPECT_EQ(pv.replayable(std::vector<uint32_t>{1, 2}, std::vector<uint32_t>{1, 2}),
            (std::vector<bool>{false, false}));
  // Page 0 rewritten after the others attended to it.
  pv.on_forward(tokens_at({5, 6, 7, 8}, 0, {0}, 4));
  EXPECT_EQ(pv.replayable(all, all), (std::vector<bool>{true, false, false}));

  // A recomputed context page must be full: a later page attended to all of its slots.
  KvProvenance partial(8, 4, 4);
  partial.on_forward(tokens_at(iota_tokens(1, 6), 0, {0, 1}, 2));
  partial.on_forward(tokens_at({7}, 8, {0, 1, 2}, 1));  // page 1's slots 2-3 never written
  EXPECT_EQ(partial.replayable(all, all), (std::vector<bool>{true, true, false}));
  // Saved (no recipe) or shared, page 1 comes back exactly: page 2 can be recomputed.
  partial.on_opaque_write(1);
  EXPECT_EQ(partial.replayable(all, all), (std::vector<bool>{true, false, false}));
}

TEST(KvProvenance, ReplayJoinsChainsOfFullPagesAndRunsForksAfterTheirTrunk) {
  KvProvenance pv(16, 4, 4);
  pv.on_forward(tokens_at(iota_tokens(1, 8), 0, {0, 1}, 4));
  pv.on_forward(tokens_at({20, 21}, 8, {0, 1, 2}, 2));  // one branch
  pv.on_forward(tokens_at({30}, 8, {0, 1, 3}, 1));      // another over the same trunk
  const std::vector<uint32_t> own{3, 2, 1, 0};
  const std::unordered_map<uint32_t, uint32_t> fresh{{0, 10}, {1, 11}, {2, 12}, {3, 13}};
  auto plan = pv.replay_plan(pv.detach(own), fresh);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->sequences.size(), 2u);
  const SequenceInput& trunk = plan->sequences[0];
  std::vector<int32_t> want = iota_tokens(1, 8);
  want.push_back(20);
  want.push_back(21);
  EXPECT_EQ(trunk.tokens, want);
  EXPECT_EQ(trunk.positions, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(trunk.kv_pages, (std::vector<uint32_t>{10, 11, 12}));
  EXPECT_EQ(trunk.last_page_len, 2u);
  EXPECT_TRUE(trunk.mask.empty());
  EXPECT_TRUE(trunk.outputs.empty());
  EXPECT_EQ(plan->writes[0], (std::vector<uint32_t>{10, 11, 12}));
  const SequenceInput& fork = plan->sequences[1];
  EXPECT_EQ(fork.tokens, (std::vector<int32_t>{30}));
  EXPECT_EQ(fork.positions, (std::vector<uint32_t>{8}));
  EXPECT_EQ(fork.kv_pages, (std::vector<uint32_t>{10, 11, 13}));
  EXPECT_EQ(plan->writes[1], (std::vector<uint32_t>{13}));
  EXPECT_EQ(plan->tokens, 11u);

  // A context page it kept (shared) but someone rewrote meanwhile: nothing to replay over.
  KvProvenance kept(16, 4, 4);
  kept.on_forward(tokens_at(iota_tokens(1, 8), 0, {0, 1}, 4));
  auto detached = kept.detach(std::vector<uint32_t>{1});
  kept.on_opaque_write(0);
  EXPECT_FALSE(kept.replay_plan(std::move(detached), {{1, 11}}));
}

// ---------------------------------------------------------------- the controller (FakeBackend)

ControllerOptions recompute() {
  ControllerOptions o;
  o.preemption = Preemption::Recompute;
  return o;
}

KillFn no_kill() {
  return [](const std::string& why) { ADD_FAILURE() << "no one is killed: " << why; };
}

// The next-token distribution of one more token over the instance's context.
CallOutcome continue_with(Controller& ctl, InstanceId id, QueueId q, int32_t token, uint32_t pos,
                          std::vector<uint32_t> pages, uint32_t last_len) {
  return run(ctl, id, q, prompt({token}, pos, std::move(pages), last_len));
}

// Both calls succeeded with the same next-token distribution.
void expect_same_distribution(const CallOutcome& got, const CallOutcome& expected) {
  ASSERT_TRUE(got.ok()) << got;
  ASSERT_TRUE(expected.ok()) << expected;
  EXPECT_EQ(got->forward.outputs[0].dist.ids, expected->forward.outputs[0].dist.ids);
  EXPECT_EQ(got->forward.outputs[0].dist.probs, expected->forward.outputs[0].dist.probs);
}

TEST(KvRecompute, ADroppedInstanceIsRecomputedIntoFreshPagesWithTheSameKv) {
  auto backend = fake(6);
  Controller ctl(*backend, recompute());
  TwoInstances two(ctl, no_kill(), no_kill());
  auto& [w1, w2, q2] = two;
  auto p1 = alloc(ctl, 1, 2);
  auto p2 = alloc(ctl, 2, 4);
  ASSERT_EQ(run(ctl, 2, q2, prompt(context_of(2), 0, {p2[0], p2[1], p2[2]}, 4)).code(), Status::Ok);
  ASSERT_EQ(continue_with(ctl, 2, q2, 7, 12, p2, 1).code(), Status::Ok);

  auto more = alloc_waiting(ctl, 1, 3, w1);  // instance 2 is suspended: nothing saved
  ASSERT_TRUE(more.ok()) << more;
  auto g = ctl.gauges();
  EXPECT_EQ(g.suspensions, 1u);
  EXPECT_EQ(g.pages_dropped, 4u);
  EXPECT_EQ(g.pages_swapped_out, 0u);
  EXPECT_EQ(g.swap_bytes, 0u);
  EXPECT_EQ(ctl.forward(2, q2, prompt({8}, 13, p2, 2), nullptr), Status::Waiting);

  const uint64_t tokens_before = backend->counters().tokens;
  ctl.release_instance(1);
  ASSERT_TRUE(w2.wait_for(1));  // woken only once its pages are rebuilt
  g = ctl.gauges();
  EXPECT_EQ(g.resumes, 1u);
  EXPECT_EQ(g.instances_restoring, 0u);
  EXPECT_EQ(g.tokens_recomputed, 13u);
  EXPECT_EQ(g.pages_swapped_in, 0u);
  EXPECT_GT(g.recompute_ns, 0);
  EXPECT_EQ(backend->counters().tokens - tokens_before, 13u);  // one forward of 13 tokens

  Reference reference(fake(6));
  Controller& ref = *reference.ctl;
  const QueueId rq = reference.q;
  auto rp = alloc(ref, 9, 4);
  ASSERT_EQ(run(ref, 9, rq, prompt(context_of(2), 0, {rp[0], rp[1], rp[2]}, 4)).code(), Status::Ok);
  ASSERT_EQ(continue_with(ref, 9, rq, 7, 12, rp, 1).code(), Status::Ok);
  auto expected = continue_with(ref, 9, rq, 8, 13, rp, 2);
  auto got = continue_with(ctl, 2, q2, 8, 13, p2, 2);
  expect_same_distribution(got, expected);
  ctl.release_instance(2);
  EXPECT_EQ(ctl.gauges().pages_free, 6u);
}

// One instance's history with every kind of write: a prompt by Embeds (recipe), a page written
// with a custom mask (opaque), a copy (opaque), a decode step after them (recipe: its context
// comes back exactly).
struct MixedHistory {
  std::vector<uint32_t> pages;
};

MixedHistory write_mixed(Controller& ctl, InstanceId id, QueueId q) {
  MixedHistory h;
  h.pages = alloc(ctl, id, 4);
  auto embeds = *ctl.alloc_embeds(id, 4);
  std::promise<CallOutcome> filled;
  EXPECT_EQ(ctl.embed_tokens(id, q, {21, 22, 23, 24}, {0, 1, 2, 3}, embeds,
                             [&](CallOutcome&& o) { filled.set_value(std::move(o)); }),
            Status::Ok);
  EXPECT_TRUE(filled.get_future().get().ok());
  SequenceInput by_embeds;
  by_embeds.embed_slots = embeds;
  by_embeds.positions = {0, 1, 2, 3};
  by_embeds.kv_pages = {h.pages[0]};
  by_embeds.last_page_len = 4;
  EXPECT_EQ(run(ctl, id, q, by_embeds).code(), Status::Ok);
  SequenceInput masked = tokens_at({25, 26, 27, 28}, 4, {h.pages[0], h.pages[1]}, 4);
  masked.mask = {{5, 3}, {6, 2}, {7, 1}, {8}};  // causal, spelled out
  EXPECT_EQ(run(ctl, id, q, masked).code(), Status::Ok);
  std::promise<CallOutcome> copied;
  EXPECT_EQ(ctl.copy_kv(id, q, h.pages[1], h.pages[2], 0, 0, 4,
                        [&](CallOutcome&& o) { copied.set_value(std::move(o)); }),
            Status::Ok);
  EXPECT_TRUE(copied.get_future().get().ok());
  EXPECT_EQ(run(ctl, id, q, tokens_at({29}, 12, h.pages, 1)).code(), Status::Ok);
  return h;
}

TEST(KvRecompute, OpaquePagesAreSavedAndTheRestRecomputed) {
  auto backend = fake(6);
  Controller ctl(*backend, recompute());
  TwoInstances two(ctl, no_kill(), no_kill());
  auto& [w1, w2, q2] = two;
  MixedHistory h = write_mixed(ctl, 2, q2);
  auto all = alloc_waiting(ctl, 1, 6, w1);
  ASSERT_TRUE(all.ok()) << all;
  auto g = ctl.gauges();
  EXPECT_EQ(g.pages_dropped, 2u);      // the Embed prompt and the decode step
  EXPECT_EQ(g.pages_swapped_out, 2u);  // the masked page and the copy
  ASSERT_EQ(ctl.dealloc_pages(1, *all), Status::Ok);
  ASSERT_TRUE(w2.wait_for(1));
  g = ctl.gauges();
  EXPECT_EQ(g.pages_swapped_in, 2u);
  EXPECT_EQ(g.tokens_recomputed, 5u);

  Reference reference(fake(6));
  Controller& ref = *reference.ctl;
  const QueueId rq = reference.q;
  MixedHistory rh = write_mixed(ref, 9, rq);
  auto expected = continue_with(ref, 9, rq, 30, 13, rh.pages, 2);
  auto got = continue_with(ctl, 2, q2, 30, 13, h.pages, 2);
  expect_same_distribution(got, expected);
}

TEST(KvRecompute, CallsQueuedBeforeTheSuspensionRunAfterTheRecompute) {
  auto backend = fake(6);
  ControllerOptions opt = recompute();
  opt.policy = "t:300";  // hold calls in their queues long enough to be suspended with them
  Controller ctl(*backend, opt);
  TwoInstances two(ctl);
  auto& [w1, w2, q2] = two;
  auto p2 = alloc(ctl, 2, 4);
  ASSERT_EQ(run(ctl, 2, q2, prompt(context_of(5), 0, {p2[0], p2[1], p2[2]}, 4)).code(), Status::Ok);
  std::promise<CallOutcome> queued;
  ASSERT_EQ(ctl.forward(2, q2, prompt({7}, 12, p2, 1),
                        [&](CallOutcome&& o) { queued.set_value(std::move(o)); }),
            Status::Ok);
  auto all = alloc_waiting(ctl, 1, 6, w1);
  ASSERT_TRUE(all.ok()) << all;
  EXPECT_EQ(ctl.gauges().pages_dropped, 3u);  // page 4, never written, was saved
  ASSERT_EQ(ctl.dealloc_pages(1, *all), Status::Ok);
  auto o = queued.get_future().get();
  ASSERT_TRUE(o.ok()) << o;

  Reference reference(fake(6));
  Controller& ref = *reference.ctl;
  const QueueId rq = reference.q;
  auto rp = alloc(ref, 9, 4);
  ASSERT_EQ(run(ref, 9, rq, prompt(context_of(5), 0, {rp[0], rp[1], rp[2]}, 4)).code(), Status::Ok);
  auto expected = continue_with(ref, 9, rq, 7, 12, rp, 1);
  expect_same_distribution(o, expected);
}

// Pages over a trunk the instance shares (here with its export) are recomputed over it: the trunk
// stays resident, so only the private pages leave.
TEST(KvRecompute, PagesOverASharedTrunkAreRecomputedOverIt) {
  auto backend = fake(8);
  Controller ctl(*backend, recompute());
  TwoInstances two(ctl, no_kill(), no_kill());
  auto& [w1, w2, q2] = two;
  const std::vector<int32_t> trunk = iota_tokens(10, 8), branch = {50, 51};
  auto p2 = alloc(ctl, 2, 3);
  ASSERT_EQ(run(ctl, 2, q2, prompt(trunk, 0, {p2[0], p2[1]}, 4)).code(), Status::Ok);
  ASSERT_EQ(ctl.export_pages(2, "trunk", std::vector<uint32_t>{p2[0], p2[1]}, false), Status::Ok);
  ASSERT_EQ(run(ctl, 2, q2, prompt(branch, 8, p2, 2)).code(), Status::Ok);
  auto more = alloc_waiting(ctl, 1, 6, w1);  // 5 free: the branch page must go
  ASSERT_TRUE(more.ok()) << more;
  auto g = ctl.gauges();
  EXPECT_EQ(g.pages_dropped, 1u);
  EXPECT_EQ(g.pages_swapped_out, 0u);
  ASSERT_EQ(ctl.dealloc_pages(1, *more), Status::Ok);
  ASSERT_TRUE(w2.wait_for(1));
  EXPECT_EQ(ctl.gauges().tokens_recomputed, 2u);  // the branch alone, over the resident trunk

  Reference reference(fake(8));
  Controller& ref = *reference.ctl;
  auto rp = alloc(ref, 9, 3);
  ASSERT_EQ(run(ref, 9, reference.q, prompt(trunk, 0, {rp[0], rp[1]}, 4)).code(), Status::Ok);
  ASSERT_EQ(run(ref, 9, reference.q, prompt(branch, 8, rp, 2)).code(), Status::Ok);
  expect_same_distribution(continue_with(ctl, 2, q2, 52, 10, p2, 3),
                           continue_with(ref, 9, reference.q, 52, 10, rp, 3));
}

// A trunk page it kept but another instance rewrote while it was away: what its pages attended to
// is gone, so it ends with the reason instead of computing over different K/V.
TEST(KvRecompute, ASharedTrunkRewrittenMeanwhileEndsTheInstance) {
  auto backend = fake(8);
  Controller ctl(*backend, recompute());
  std::promise<std::string> killed;
  TwoInstances two(ctl, no_kill(), [&](const std::string& why) { killed.set_value(why); });
  auto& [w1, w2, q2] = two;
  auto p2 = alloc(ctl, 2, 3);
  ASSERT_EQ(run(ctl, 2, q2, prompt(iota_tokens(10, 8), 0, {p2[0], p2[1]}, 4)).code(), Status::Ok);
  ASSERT_EQ(ctl.export_pages(2, "trunk", std::vector<uint32_t>{p2[0], p2[1]}, false), Status::Ok);
  ASSERT_EQ(run(ctl, 2, q2, prompt({50, 51}, 8, p2, 2)).code(), Status::Ok);
  auto more = alloc_waiting(ctl, 1, 6, w1);
  ASSERT_TRUE(more.ok()) << more;
  ASSERT_EQ(ctl.gauges().pages_dropped, 1u);
  ctl.register_instance(3, nullptr);
  QueueId q3 = *ctl.create_queue(3);
  auto shared = ctl.import_pages(3, "trunk");
  ASSERT_TRUE(shared.ok()) << shared;
  ASSERT_EQ(run(ctl, 3, q3, prompt({99}, 4, *shared, 1)).code(),
            Status::Ok);  // page 2 of the trunk
  ASSERT_EQ(ctl.dealloc_pages(1, *more), Status::Ok);
  auto why = killed.get_future().get();
  EXPECT_NE(why.find("rewritten while it was suspended"), std::string::npos) << why;
  EXPECT_EQ(ctl.gauges().instances, 2u);
}

TEST(KvRecompute, AFailedRecomputeEndsTheInstanceWithTheReason) {
  auto backend = fake(4);
  Controller ctl(*backend, recompute());
  std::promise<std::string> killed;
  TwoInstances two(ctl, nullptr, [&](const std::string& why) { killed.set_value(why); });
  auto& [w1, w2, q2] = two;
  auto p2 = alloc(ctl, 2, 3);
  ASSERT_EQ(run(ctl, 2, q2, prompt(context_of(3), 0, p2, 4)).code(), Status::Ok);
  auto p1 = alloc_waiting(ctl, 1, 4, w1);
  ASSERT_TRUE(p1.ok()) << p1;
  EXPECT_EQ(ctl.gauges().pages_dropped, 3u);
  // The batch and its one-by-one retry both fail.
  backend->fail_call(FakeHandler::Forward, 1, FakeFailure::Error, 2);
  ctl.release_instance(1);
  auto why = killed.get_future().get();
  EXPECT_NE(why.find("could not be recomputed after a suspension"), std::string::npos) << why;
  auto g = ctl.gauges();
  EXPECT_EQ(g.instances, 0u);
  EXPECT_EQ(g.instances_restoring, 0u);
  EXPECT_EQ(g.pages_free, 4u);
}

// ---------------------------------------------------------------- the real engine

std::unique_ptr<Engine> tiny_engine(const std::string& name, size_t pages) {
  auto weights = load_model(std::string(PITH_TEST_DATA) + "/models/" + name + ".gguf",
                            LoadOptions{.quiet = true});
  EngineOptions o;
  o.kv_page_size = 16;
  const auto& c = weights->config;
  o.kv_memory_bytes = pages * size_t{c.n_layers} * 2 * 16 * c.kv_dim() * sizeof(float);
  o.max_embeds = 16;
  o.n_threads = 2;
  return std::make_unique<Engine>(weights, o);
}

// The first pages of `pages` that hold `slots` slots, and the last one's length.
SequenceInput step_at(std::vector<int32_t> tokens, uint32_t first_pos,
                      const std::vector<uint32_t>& pages) {
  const uint32_t end = first_pos + static_cast<uint32_t>(tokens.size());
  const uint32_t used = (end + 15) / 16;
  SequenceInput s =
      prompt(std::move(tokens), first_pos,
             std::vector<uint32_t>(pages.begin(), pages.begin() + used), end - (used - 1) * 16);
  s.outputs[0].kind = OutputKind::Logits;
  return s;
}

// A 40-token prompt, then `steps` decode steps by greedy choice; returns all the tokens.
std::vector<int32_t> history(Controller& ctl, InstanceId id, QueueId q,
                             const std::vector<uint32_t>& pages, uint32_t steps) {
  std::vector<int32_t> toks;
  for (int i = 0; i < 40; ++i) toks.push_back((100 + 37 * i) % 1000);
  auto o = run(ctl, id, q, step_at(toks, 0, pages));
  for (uint32_t s = 0; o.ok() && s < steps; ++s) {
    const auto& l = o->forward.outputs[0].logits;
    toks.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    o = run(ctl, id, q, step_at({toks.back()}, 40 + s, pages));
  }
  EXPECT_TRUE(o.ok()) << o;
  return toks;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Each weight format. Recomputing is a prefill of the instance's tokens, so its K/V are the ones a
// prefill of those tokens computes (bit for bit on one CPU): the next logits must equal such a
// prefill's, and match the decode steps that first wrote them up to the engine's own difference
// between prefill and decode kernels (summation order; nothing on these models).
class KvRecomputeEngine : public testing::TestWithParam<std::string> {};

TEST_P(KvRecomputeEngine, RecomputesTheKvAPrefillComputes) {
  constexpr uint32_t kSteps = 20;  // 60 slots in 4 pages
  auto engine = tiny_engine(GetParam(), 5);
  Controller ctl(*engine, recompute());
  TwoInstances two(ctl, no_kill(), no_kill());
  auto& [w1, w2, q2] = two;
  auto p2 = alloc(ctl, 2, 4);
  const std::vector<int32_t> toks = history(ctl, 2, q2, p2, kSteps);
  auto all = alloc_waiting(ctl, 1, 5, w1);
  ASSERT_TRUE(all.ok()) << all;
  EXPECT_EQ(ctl.gauges().pages_dropped, 4u);
  ASSERT_EQ(ctl.dealloc_pages(1, *all), Status::Ok);
  ASSERT_TRUE(w2.wait_for(1));
  EXPECT_EQ(ctl.gauges().tokens_recomputed, 40 + kSteps);
  auto got = run(ctl, 2, q2, step_at({7}, 40 + kSteps, p2));
  ASSERT_TRUE(got.ok()) << got;

  Reference decoded(tiny_engine(GetParam(), 5));  // the same history, unpressured
  auto dp = alloc(*decoded.ctl, 9, 4);
  EXPECT_EQ(history(*decoded.ctl, 9, decoded.q, dp, kSteps), toks);
  auto after_decode = run(*decoded.ctl, 9, decoded.q, step_at({7}, 40 + kSteps, dp));
  ASSERT_TRUE(after_decode.ok()) << after_decode;

  Reference prefilled(tiny_engine(GetParam(), 5));  // its tokens in one prefill
  auto pp = alloc(*prefilled.ctl, 9, 4);
  ASSERT_TRUE(run(*prefilled.ctl, 9, prefilled.q, step_at(toks, 0, pp)).ok());
  auto after_prefill = run(*prefilled.ctl, 9, prefilled.q, step_at({7}, 40 + kSteps, pp));
  ASSERT_TRUE(after_prefill.ok()) << after_prefill;

  const auto& logits = got->forward.outputs[0].logits;
  EXPECT_LE(max_abs_diff(logits, after_prefill->forward.outputs[0].logits), 1e-6f);
  EXPECT_LT(max_abs_diff(logits, after_decode->forward.outputs[0].logits), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Formats, KvRecomputeEngine,
                         testing::Values("tiny-f32", "tiny-bf16", "tiny-q8_0"));

}  // namespace
}  // namespace pith
