// Recurrent states of hybrid models as control-layer resources, on the real engine with a tiny
// random Qwen3.5: a state per sequence named by handle, emptied when allocated, advanced by the
// forwards that name it (also across prefill chunks and beside other sequences in one batch),
// forked by a queued copy, exported and imported, checkpointed by the prefix cache, counted by
// quota and gauges, and released with its instance.
#include <gtest/gtest.h>

#include <future>

#include "control/controller.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"
#include "engine_test_util.h"
#include "generated_model.h"
#include "kv_pressure_helpers.h"

namespace pith {
namespace {

constexpr uint32_t kPage = 16;

std::unique_ptr<Engine> hybrid_engine() {
  return test::make_engine(test::generated_model("qwen35", 5), kPage);
}

CallOutcome wait_for(const std::function<Result<void>(CallCompletion)>& submit) {
  std::promise<CallOutcome> p;
  auto f = p.get_future();
  auto s = submit([&](CallOutcome&& o) { p.set_value(std::move(o)); });
  if (!s) return s.failure();
  return f.get();
}

// tokens[from, to) of a sequence at positions from.. over `pages` (handles), advancing `state`
// (a handle), with the top-5 distribution after the last input.
SequenceInput piece(const std::vector<int32_t>& tokens, uint32_t from, uint32_t to,
                    const std::vector<uint32_t>& pages, uint32_t state) {
  SequenceInput s;
  s.tokens.assign(tokens.begin() + from, tokens.begin() + to);
  for (uint32_t p = from; p < to; ++p) s.positions.push_back(p);
  s.kv_pages.assign(pages.begin(), pages.begin() + (to + kPage - 1) / kPage);
  s.last_page_len = to - (to - 1) / kPage * kPage;
  s.state_slot = state;
  s.outputs.push_back({to - from - 1, OutputKind::TopK, 5, 0});
  return s;
}

struct Seq {
  std::vector<uint32_t> pages;
  uint32_t state = 0;
  QueueId queue = 0;
};

class ControllerStates : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  void start(ControllerOptions o) {
    ctl_.reset();
    engine_ = hybrid_engine();
    ctl_ = std::make_unique<Controller>(*engine_, o);
    ctl_->register_instance(1, nullptr);
    ctl_->register_instance(2, nullptr);
  }
  Seq sequence(InstanceId id, uint32_t max_tokens) {
    Seq s;
    s.pages = *ctl_->alloc_pages(id, (max_tokens + kPage - 1) / kPage);
    std::vector<uint32_t> st;
    EXPECT_TRUE(ctl_->alloc_states(id, 1, st).ok());
    s.state = st.at(0);
    s.queue = *ctl_->create_queue(id);
    return s;
  }
  TokenDistribution run(InstanceId id, const Seq& s, const std::vector<int32_t>& tokens,
                        uint32_t from, uint32_t to) {
    auto o = wait_for([&](CallCompletion done) {
      return ctl_->forward(id, s.queue, piece(tokens, from, to, s.pages, s.state), std::move(done));
    });
    EXPECT_TRUE(o.ok()) << (o.ok() ? "" : o.failure().message);
    return o.ok() ? o->forward.outputs.at(0).dist : TokenDistribution{};
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Controller> ctl_;
};

void expect_same(const TokenDistribution& a, const TokenDistribution& b, float tol = 1e-5f) {
  ASSERT_EQ(a.ids, b.ids);
  for (size_t i = 0; i < a.probs.size(); ++i) EXPECT_NEAR(a.probs[i], b.probs[i], tol);
}

TEST_F(ControllerStates, ForwardsNeedAStateAndAdvanceIt) {
  auto tokens = test::random_tokens(40, 3);
  Seq a = sequence(1, 40);
  auto whole = run(1, a, tokens, 0, 40);
  // The same sequence in pieces on another state (the state carries it across calls).
  Seq b = sequence(1, 40);
  run(1, b, tokens, 0, 17);
  run(1, b, tokens, 17, 39);
  expect_same(run(1, b, tokens, 39, 40), whole);

  SequenceInput stateless = piece(tokens, 0, 4, a.pages, 0);
  stateless.state_slot = SequenceInput::kNoState;
  auto r = ctl_->forward(1, a.queue, std::move(stateless), [](CallOutcome&&) {});
  EXPECT_EQ(r, Status::BadArgument);
  EXPECT_NE(r.message().find("bind a state"), std::string::npos) << r.message();
  // Another instance's state handle is not this instance's.
  Seq other = sequence(2, 16);
  EXPECT_EQ(
      ctl_->forward(2, other.queue, piece(tokens, 0, 4, other.pages, 2), [](CallOutcome&&) {}),
      Status::BadHandle);
}

TEST_F(ControllerStates, ANewStateIsEmptyEvenInAReusedSlot) {
  auto tokens = test::random_tokens(20, 4);
  Seq a = sequence(1, 20);
  auto first = run(1, a, tokens, 0, 20);
  // Free the used state and take the slot again: it must start empty, not where `a` ended.
  ASSERT_TRUE(ctl_->dealloc_states(1, std::vector<uint32_t>{a.state}).ok());
  std::vector<uint32_t> st;
  ASSERT_TRUE(ctl_->alloc_states(1, 1, st).ok());
  a.state = st[0];
  expect_same(run(1, a, tokens, 0, 20), first, 0);
}

TEST_F(ControllerStates, ACopiedStateContinuesLikeTheOriginal) {
  auto tokens = test::random_tokens(30, 5);
  Seq a = sequence(1, 30), b = sequence(1, 30);
  run(1, a, tokens, 0, 20);
  // Fork after 20 tokens: copy the state (queued after a's forward) and the K/V pages.
  ASSERT_TRUE(wait_for([&](CallCompletion done) {
                return ctl_->copy_state(1, a.queue, a.state, b.state, std::move(done));
              }).ok());
  for (uint32_t p = 0; p < 2; ++p)
    ASSERT_TRUE(wait_for([&](CallCompletion done) {
                  return ctl_->copy_kv(1, a.queue, a.pages[p], b.pages[p], 0, 0, p == 0 ? kPage : 4,
                                       std::move(done));
                }).ok());
  // Both continue with the same 10 tokens, submitted together (one batch, two states).
  std::promise<CallOutcome> pa, pb;
  ASSERT_TRUE(ctl_->forward(1, a.queue, piece(tokens, 20, 30, a.pages, a.state),
                            [&](CallOutcome&& o) { pa.set_value(std::move(o)); })
                  .ok());
  ASSERT_TRUE(ctl_->forward(1, b.queue, piece(tokens, 20, 30, b.pages, b.state),
                            [&](CallOutcome&& o) { pb.set_value(std::move(o)); })
                  .ok());
  auto oa = pa.get_future().get(), ob = pb.get_future().get();
  ASSERT_TRUE(oa.ok() && ob.ok());
  expect_same(ob->forward.outputs[0].dist, oa->forward.outputs[0].dist, 0);
  Seq c = sequence(1, 30);
  expect_same(run(1, c, tokens, 0, 30), oa->forward.outputs[0].dist);
}

TEST_F(ControllerStates, ChunkedPrefillCarriesTheState) {
  auto tokens = test::random_tokens(45, 6);
  auto whole = run(1, sequence(1, 45), tokens, 0, 45);
  ControllerOptions chunked;
  chunked.max_batch_tokens = 8;  // 6 chunks
  start(chunked);
  expect_same(run(1, sequence(1, 45), tokens, 0, 45), whole);
}

TEST_F(ControllerStates, PrefixCacheRestoresPagesAndStateFromACheckpoint) {
  auto tokens = test::random_tokens(40, 7);
  // Instance 1 computes 32 tokens (two pages), checkpoints the state there, offers both.
  Seq a = sequence(1, 40);
  run(1, a, tokens, 0, 32);
  std::vector<uint32_t> ck;
  ASSERT_TRUE(ctl_->alloc_states(1, 1, ck).ok());
  ASSERT_TRUE(wait_for([&](CallCompletion done) {
                return ctl_->copy_state(1, a.queue, a.state, ck[0], std::move(done));
              }).ok());
  std::span<const int32_t> all(tokens);
  // Pages alone are refused: they do not resume a hybrid sequence.
  EXPECT_EQ(ctl_->prefix_insert(1, all.first(32), std::span(a.pages).first(2)),
            Status::BadArgument);
  ASSERT_TRUE(ctl_->prefix_insert(1, all.first(32), std::span(a.pages).first(2), 0, ck[0]).ok());
  ASSERT_TRUE(ctl_->dealloc_states(1, ck).ok());  // the cache keeps its own reference
  EXPECT_EQ(ctl_->gauges().states_cached, 1u);
  auto expected = run(1, a, tokens, 32, 40);

  // Instance 2 matches 39 tokens: the checkpoint after 32, with both pages.
  auto m = ctl_->prefix_match(2, all.first(39));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->matched, 32u);
  ASSERT_EQ(m->handles.size(), 2u);
  ASSERT_NE(m->state, 0u);
  Seq b = sequence(2, 40);
  b.pages[0] = m->handles[0];
  b.pages[1] = m->handles[1];
  ASSERT_TRUE(wait_for([&](CallCompletion done) {
                return ctl_->copy_state(2, b.queue, m->state, b.state, std::move(done));
              }).ok());
  expect_same(run(2, b, tokens, 32, 40), expected, 0);
  // A prefix shorter than the checkpoint matches nothing (no state to resume from).
  EXPECT_EQ(ctl_->prefix_match(2, all.first(31))->matched, 0u);
}

TEST_F(ControllerStates, ExportImportQuotaGaugesAndRelease) {
  ControllerOptions o;
  o.max_states_per_instance = 2;
  start(o);
  const uint32_t total = ctl_->gauges().states_total;
  ASSERT_GT(total, 4u);
  std::vector<uint32_t> st;
  ASSERT_TRUE(ctl_->alloc_states(1, 2, st).ok());
  std::vector<uint32_t> more;
  auto over = ctl_->alloc_states(1, 1, more);
  EXPECT_EQ(over, Status::OutOfStates);
  EXPECT_NE(over.message().find("quota 2"), std::string::npos) << over.message();
  EXPECT_EQ(ctl_->gauges().states_free, total - 2);

  ASSERT_TRUE(ctl_->export_state(1, "s", st[0], /*persistent=*/true).ok());
  EXPECT_EQ(ctl_->export_state(1, "s", st[1], true), Status::AlreadyExists);
  auto imported = ctl_->import_state(2, "s");
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(ctl_->import_state(2, "nope"), Status::NotFound);
  ctl_->release_instance(1);  // the export and the importer still hold the state
  EXPECT_EQ(ctl_->gauges().states_free, total - 1);
  ASSERT_TRUE(ctl_->remove_state_export("s").ok());
  ctl_->release_instance(2);
  EXPECT_EQ(ctl_->gauges().states_free, total);
}

// A pool of two states: an allocation waits while another instance holds states it will give
// back, is woken when it can have them, and is refused when nobody could ever end its wait (or
// it fails fast).
// A forward that waits for its outcome; the distribution after its last input.
TokenDistribution forward_dist(Controller& c, InstanceId id, QueueId q, SequenceInput seq) {
  auto out = wait_for(
      [&](CallCompletion done) { return c.forward(id, q, std::move(seq), std::move(done)); });
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.failure().message);
  return out.ok() ? out->forward.outputs.at(0).dist : TokenDistribution{};
}

// An engine configuration whose state pool holds exactly n sequences' states.
EngineOptions state_pool(const ModelWeights& weights, uint32_t n) {
  EngineOptions o;
  o.kv_page_size = kPage;
  o.kv_memory_bytes = size_t{8} << 20;
  o.max_embeds = 64;
  o.n_threads = 2;
  o.state_memory_bytes = n * weights.config.recurrent_state_floats() * sizeof(float);
  return o;
}

EngineOptions two_state_pool(const ModelWeights& weights) {
  return state_pool(weights, 2);
}

// Instances 1, 2, ... registered, each with its waker.
void register_woken(Controller& ctl, std::initializer_list<Waker*> wakers) {
  InstanceId id = 1;
  for (Waker* w : wakers) {
    ctl.register_instance(id, nullptr);
    ctl.set_waker(id++, w->fn());
  }
}

TEST(ControllerStatesPool, AllocationsWaitForStatesOthersGiveBack) {
  auto weights = test::generated_model("qwen35", 5);
  const EngineOptions o = two_state_pool(*weights);
  Engine engine(weights, o);
  ASSERT_EQ(engine.state_slots().capacity(), 2u);
  Controller ctl(engine, {});
  Waker w1, w2, w3;
  register_woken(ctl, {&w1, &w2, &w3});
  std::vector<uint32_t> a, b, c;
  ASSERT_TRUE(ctl.alloc_states(1, 2, a).ok());
  EXPECT_EQ(ctl.alloc_states(2, 1, b), Status::Waiting);
  EXPECT_EQ(ctl.gauges().states_waiting, 1u);
  ctl.set_fail_fast(3, true);
  EXPECT_EQ(ctl.alloc_states(3, 1, c), Status::OutOfStates);
  // The holder asks for more while the only other one waits holding nothing: no one could give
  // a state back, so it is refused at once.
  EXPECT_EQ(ctl.alloc_states(1, 1, c), Status::OutOfStates);
  // It gives one back: the waiter is woken and gets it.
  ASSERT_TRUE(ctl.dealloc_states(1, std::vector<uint32_t>{a[0]}).ok());
  ASSERT_TRUE(w2.wait_for(1));
  ASSERT_TRUE(ctl.alloc_states(2, 1, b).ok());
  auto g = ctl.gauges();
  EXPECT_EQ(g.states_waiting, 0u);
  EXPECT_EQ(g.states_free, 0u);
  EXPECT_GT(g.state_wait_ns, 0u);
  // Waiting again; the holder ends: woken again.
  EXPECT_EQ(ctl.alloc_states(2, 1, c), Status::Waiting);
  ctl.release_instance(1);
  ASSERT_TRUE(w2.wait_for(2));
  EXPECT_TRUE(ctl.alloc_states(2, 1, c).ok());
}

// Under state pressure an instance the waiter outranks is suspended like under KV pressure: its
// states (and private pages) go to host memory, the waiter gets an empty slot, and the
// suspended instance resumes into fresh slots once they are free, its queued forward moved to
// them: its sequence continues exactly as an unpressured one does.
TEST(ControllerStatesPool, StatePressureSuspendsAnOutrankedInstanceWithItsStates) {
  auto weights = test::generated_model("qwen35", 5);
  const EngineOptions o = two_state_pool(*weights);
  Engine engine(weights, o);
  ASSERT_EQ(engine.state_slots().capacity(), 2u);
  ControllerOptions copt;
  copt.policy = "t:300";  // hold calls in their queues long enough to be suspended with them
  Controller ctl(engine, copt);
  Waker w1, w2;
  ctl.register_instance(1, [](const std::string&) { ADD_FAILURE() << "no one is killed"; });
  ctl.register_instance(2, [](const std::string&) { ADD_FAILURE() << "no one is killed"; });
  ctl.set_waker(1, w1.fn());
  ctl.set_waker(2, w2.fn());
  const auto tokens = test::random_tokens(24, 7);

  // The newer instance holds the whole state pool, 20 tokens into a sequence, its next step
  // queued.
  const QueueId q2 = *ctl.create_queue(2);
  const auto pages2 = *ctl.alloc_pages(2, 2);
  std::vector<uint32_t> st2;
  ASSERT_TRUE(ctl.alloc_states(2, 2, st2).ok());
  forward_dist(ctl, 2, q2, piece(tokens, 0, 20, pages2, st2[0]));
  std::promise<CallOutcome> queued;
  ASSERT_EQ(ctl.forward(2, q2, piece(tokens, 20, 21, pages2, st2[0]),
                        [&](CallOutcome&& r) { queued.set_value(std::move(r)); }),
            Status::Ok);

  // The older one asks for a state: the newer one is suspended with its states and pages.
  std::vector<uint32_t> st1;
  ASSERT_EQ(ctl.alloc_states(1, 1, st1), Status::Waiting);
  ASSERT_TRUE(w1.wait_for(1));
  ASSERT_TRUE(ctl.alloc_states(1, 1, st1).ok());
  auto g = ctl.gauges();
  EXPECT_EQ(g.suspensions, 1u);
  EXPECT_EQ(g.instances_suspended, 1u);
  EXPECT_EQ(g.states_swapped_out, 2u);
  EXPECT_EQ(g.pages_swapped_out, 2u);
  EXPECT_EQ(g.swap_bytes, 2 * engine.state_bytes() + 2 * engine.kv_page_bytes());
  // While it is out, its calls that name states wait (their slot ids are stale).
  EXPECT_EQ(ctl.dealloc_states(2, std::vector<uint32_t>{st2[1]}), Status::Waiting);
  EXPECT_EQ(ctl.copy_state(2, q2, st2[0], st2[1], [](CallOutcome&&) {}), Status::Waiting);
  EXPECT_EQ(ctl.export_state(2, "out", st2[0], false), Status::Waiting);
  // So do new states: a slot given to it now could be one of its stale ids, which the resume
  // rewrites (two handles on one slot, a reference short: the serving process aborted).
  std::vector<uint32_t> more;
  EXPECT_EQ(ctl.alloc_states(2, 1, more), Status::Waiting);
  EXPECT_EQ(ctl.import_state(2, "anything").code(), Status::Waiting);

  // Its slot held the suspended sequence's state; the waiter's starts empty all the same.
  Engine ref_engine(weights, o);
  Controller ref(ref_engine, {});
  ref.register_instance(9, nullptr);
  const QueueId rq = *ref.create_queue(9);
  const auto rpages = *ref.alloc_pages(9, 2);
  std::vector<uint32_t> rst;
  ASSERT_TRUE(ref.alloc_states(9, 1, rst).ok());
  const QueueId q1 = *ctl.create_queue(1);
  const auto pages1 = *ctl.alloc_pages(1, 2);
  expect_same(forward_dist(ctl, 1, q1, piece(tokens, 0, 20, pages1, st1[0])),
              forward_dist(ref, 9, rq, piece(tokens, 0, 20, rpages, rst[0])), 0);

  // The older one ends: the newer one is resumed into fresh slots, its queued step runs on its
  // own state, and its sequence goes on as the unpressured one does.
  ctl.release_instance(1);
  ASSERT_TRUE(w2.wait_for(1));
  auto step = queued.get_future().get();
  ASSERT_TRUE(step.ok()) << step.failure().message;
  g = ctl.gauges();
  EXPECT_EQ(g.resumes, 1u);
  EXPECT_EQ(g.states_swapped_in, 2u);
  EXPECT_EQ(g.swap_bytes, 0u);
  expect_same(step->forward.outputs.at(0).dist,
              forward_dist(ref, 9, rq, piece(tokens, 20, 21, rpages, rst[0])));
  expect_same(forward_dist(ctl, 2, q2, piece(tokens, 21, 24, pages2, st2[0])),
              forward_dist(ref, 9, rq, piece(tokens, 21, 24, rpages, rst[0])));
  ctl.release_instance(2);
  EXPECT_EQ(ctl.gauges().states_free, 2u);
}

// States promised to a woken waiter are withdrawn when that waiter is suspended before it takes
// them: held for it, they left the only running instance refused (or waiting forever) with the
// states free (8 graph-of-thought instances on Qwen3.5 failed so). The waiter gets them again
// when it resumes.
TEST(ControllerStatesPool, APromiseToASuspendedWaiterIsWithdrawnUntilItResumes) {
  auto weights = test::generated_model("qwen35", 5);
  Engine engine(weights, state_pool(*weights, 4));
  ASSERT_EQ(engine.state_slots().capacity(), 4u);
  Controller ctl(engine, {});
  Waker w1, w2, w3;
  register_woken(ctl, {&w1, &w2, &w3});
  std::vector<uint32_t> s1, s2, s3, more3;
  ASSERT_TRUE(ctl.alloc_states(2, 2, s2).ok());
  ASSERT_TRUE(ctl.alloc_states(3, 1, s3).ok());
  // The newest wants two more; one is free: it waits, and is promised two once 2 gives one back.
  EXPECT_EQ(ctl.alloc_states(3, 2, more3), Status::Waiting);
  ASSERT_TRUE(ctl.dealloc_states(2, std::vector<uint32_t>{s2[1]}).ok());
  ASSERT_TRUE(w3.wait_for(1));
  // Before it takes them the oldest asks: the promise leaves none, so it waits and suspends the
  // newest (it holds a state of its own) to make room.
  EXPECT_EQ(ctl.alloc_states(1, 1, s1), Status::Waiting);
  ASSERT_TRUE(w1.wait_for(1));
  ASSERT_TRUE(ctl.alloc_states(1, 1, s1).ok());
  EXPECT_EQ(ctl.gauges().instances_suspended, 1u);
  // The suspended waiter's promise went with it: two more states are there for the oldest now.
  std::vector<uint32_t> more1;
  ASSERT_TRUE(ctl.alloc_states(1, 2, more1).ok());
  EXPECT_EQ(ctl.gauges().states_free, 0u);
  // The oldest ends: the newest resumes with its state, is promised two again and takes them.
  ctl.release_instance(1);
  ASSERT_TRUE(w3.wait_for(2));
  EXPECT_EQ(ctl.alloc_states(3, 2, more3), Status::Ok);
  auto g = ctl.gauges();
  EXPECT_EQ(g.resumes, 1u);
  EXPECT_EQ(g.states_waiting, 0u);
  EXPECT_EQ(g.states_free, 0u);
}

// A state suspended before any batch emptied it (new, in a reused slot) comes back empty, and
// the emptying it was waiting for does not hit the slot another of its states resumed into.
TEST(ControllerStatesPool, AStateSuspendedBeforeItsFirstUseComesBackEmpty) {
  auto weights = test::generated_model("qwen35", 5);
  const EngineOptions o = two_state_pool(*weights);
  const auto tokens = test::random_tokens(24, 8);
  // Unpressured: the sequence's distributions after 20 and 24 tokens.
  Engine ref_engine(weights, o);
  Controller ref(ref_engine, {});
  ref.register_instance(9, nullptr);
  const QueueId rq = *ref.create_queue(9);
  const auto rpages = *ref.alloc_pages(9, 2);
  std::vector<uint32_t> rst;
  ASSERT_TRUE(ref.alloc_states(9, 1, rst).ok());
  const auto at20 = forward_dist(ref, 9, rq, piece(tokens, 0, 20, rpages, rst[0]));
  const auto at24 = forward_dist(ref, 9, rq, piece(tokens, 20, 24, rpages, rst[0]));

  // Either order of the two slots in the pool.
  for (int round = 0; round < 2; ++round) {
    Engine engine(weights, o);
    Controller ctl(engine, {});
    Waker w1, w2;
    ctl.register_instance(1, nullptr);
    ctl.register_instance(2, nullptr);
    ctl.set_waker(1, w1.fn());
    ctl.set_waker(2, w2.fn());
    const QueueId q2 = *ctl.create_queue(2);
    const auto pages2 = *ctl.alloc_pages(2, 2), pages3 = *ctl.alloc_pages(2, 2);
    std::vector<uint32_t> both, live, fresh;
    ASSERT_TRUE(ctl.alloc_states(2, 2, both).ok());
    // One slot holds a finished sequence, freed and taken again (uncleared); the other a live
    // sequence 20 tokens in.
    const uint32_t dead = both[round], kept = both[1 - round];
    forward_dist(ctl, 2, q2, piece(tokens, 0, 20, pages3, dead));
    forward_dist(ctl, 2, q2, piece(tokens, 0, 20, pages2, kept));
    ASSERT_TRUE(ctl.dealloc_states(2, std::vector<uint32_t>{dead}).ok());
    ASSERT_TRUE(ctl.alloc_states(2, 1, fresh).ok());
    std::vector<uint32_t> st1;
    ASSERT_EQ(ctl.alloc_states(1, 1, st1), Status::Waiting);
    ASSERT_TRUE(w1.wait_for(1));
    ASSERT_TRUE(ctl.alloc_states(1, 1, st1).ok());
    EXPECT_EQ(ctl.gauges().states_swapped_out, 2u);
    ctl.release_instance(1);
    ASSERT_TRUE(w2.wait_for(1));
    expect_same(forward_dist(ctl, 2, q2, piece(tokens, 20, 24, pages2, kept)), at24);
    expect_same(forward_dist(ctl, 2, q2, piece(tokens, 0, 20, pages3, fresh[0])), at20);
  }
}

TEST(ControllerStatesPool, PlainModelsHaveNoStatesAndHybridOnesNeedAPool) {
  auto plain = test::make_engine(test::generated_model("llama", 5), kPage);
  Controller ctl(*plain, {});
  ctl.register_instance(1, nullptr);
  std::vector<uint32_t> st;
  EXPECT_EQ(ctl.alloc_states(1, 1, st), Status::Unsupported);
  EXPECT_FALSE(ctl.recurrent());

  ModelConfig c;
  c.vocab_size = 100;
  c.d_model = 8;
  c.n_layers = 2;
  c.recurrent_layers = {1, 0};
  FakeBackend fake(c, FakeBackendOptions{16, 8, 64});  // keeps no states
  EXPECT_THROW(Controller(fake, ControllerOptions{}), Error);
}

}  // namespace
}  // namespace pith
