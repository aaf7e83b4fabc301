#include "bench/request_driver.h"

#include <algorithm>
#include <future>

#include "common/error.h"

namespace pith::bench {

namespace {

CallOutput call(const std::function<Result<void>(CallCompletion)>& submit) {
  std::promise<CallOutcome> p;
  auto f = p.get_future();
  auto s = submit([&p](CallOutcome&& o) { p.set_value(std::move(o)); });
  if (!s) fail("request: call rejected: {} ({})", status_name(s.code()), s.message());
  CallOutcome o = f.get();
  if (!o) fail("request: call failed: {} ({})", status_name(o.code()), o.message());
  return std::move(*o);
}

}  // namespace

RequestTiming run_request(Controller& ctl, InstanceId id, const RequestSpec& spec) {
  RequestTiming t;
  t.arrival = Clock::now();
  const uint32_t ps = ctl.page_size();
  ctl.register_instance(id, nullptr);
  auto queue = ctl.create_queue(id);
  if (!queue) fail("request: no queue: {}", queue.message());
  const QueueId q = *queue;

  // Hybrid models: the sequence's recurrent state, bound to its forwards; a cache hit resumes
  // from a checkpoint (matched up to the last token, which yields the first output).
  const bool hybrid = ctl.recurrent();
  uint32_t state = SequenceInput::kNoState, cached_state = 0;
  if (hybrid) {
    std::vector<uint32_t> st;
    if (auto r = ctl.alloc_states(id, 1, st); !r) fail("request: state: {}", r.message());
    state = st[0];
  }
  std::vector<uint32_t> pages;
  size_t matched = 0, shared = 0;
  if (spec.use_prefix_cache) {
    auto prompt = std::span<const int32_t>(spec.prompt);
    auto m = ctl.prefix_match(id, hybrid ? prompt.first(prompt.size() - 1) : prompt);
    if (!m) fail("request: prefix match: {}", m.message());
    pages = std::move(m->handles);
    matched = m->matched;
    cached_state = m->state;
    shared = m->shared;
  }
  if (matched == spec.prompt.size()) {  // keep one token to compute: it yields the first output
    matched -= ps;
    auto st = ctl.dealloc_pages(id, std::vector<uint32_t>{pages.back()});
    if (!st) fail("request: dealloc: {}", st.message());
    pages.pop_back();
  }
  const size_t total = spec.prompt.size() + spec.max_tokens;
  const size_t need = (total + ps - 1) / ps;
  std::vector<uint32_t> fresh;
  if (need > pages.size()) {
    auto got = ctl.alloc_pages(id, static_cast<uint32_t>(need - pages.size()));
    if (!got) fail("request: alloc: {} ({})", status_name(got.code()), got.message());
    fresh = std::move(*got);
  }
  pages.insert(pages.end(), fresh.begin(), fresh.end());

  auto sequence = [&](std::vector<int32_t> tokens, size_t first_pos) {
    SequenceInput s;
    s.tokens = std::move(tokens);
    size_t end = first_pos + s.tokens.size();
    for (size_t i = 0; i < s.tokens.size(); ++i)
      s.positions.push_back(static_cast<uint32_t>(first_pos + i));
    size_t used = (end + ps - 1) / ps;
    s.kv_pages.assign(pages.begin(), pages.begin() + used);
    s.last_page_len = static_cast<uint32_t>(end - (used - 1) * ps);
    s.outputs.push_back({static_cast<uint32_t>(s.tokens.size() - 1), OutputKind::TopK, 1, 0});
    s.state_slot = state;
    return s;
  };
  auto copy_state = [&](uint32_t from, uint32_t to) {
    call([&](CallCompletion c) { return ctl.copy_state(id, q, from, to, std::move(c)); });
  };

  t.prefill_tokens = static_cast<uint32_t>(spec.prompt.size() - matched);
  if (cached_state) {
    copy_state(cached_state, state);
    if (auto r = ctl.dealloc_states(id, std::vector<uint32_t>{cached_state}); !r)
      fail("request: dealloc state: {}", r.message());
  }
  // Hybrid, first computation of this prompt: up to its last page boundary, checkpointed there
  // for the prefix cache (what the SDK's Context does).
  size_t from = matched;
  uint32_t checkpoint = 0;
  const size_t at =
      shared > matched && shared < spec.prompt.size() ? shared : (spec.prompt.size() - 1) / ps * ps;
  // Queued behind each other without waiting, as the SDK does; their outcomes are checked once
  // the last forward is done.
  std::vector<std::future<CallOutcome>> queued;
  auto enqueue = [&](const std::function<Result<void>(CallCompletion)>& submit) {
    auto p = std::make_shared<std::promise<CallOutcome>>();
    queued.push_back(p->get_future());
    if (auto r = submit([p](CallOutcome&& o) { p->set_value(std::move(o)); }); !r)
      fail("request: call rejected: {} ({})", status_name(r.code()), r.message());
  };
  if (hybrid && spec.use_prefix_cache && at > matched) {
    std::vector<int32_t> head(spec.prompt.begin() + matched, spec.prompt.begin() + at);
    enqueue([&](CallCompletion c) {
      return ctl.forward(id, q, sequence(head, matched), std::move(c));
    });
    std::vector<uint32_t> ck;
    if (ctl.alloc_states(id, 1, ck)) {
      checkpoint = ck[0];
      enqueue(
          [&](CallCompletion c) { return ctl.copy_state(id, q, state, checkpoint, std::move(c)); });
    }
    from = at;
  }
  std::vector<int32_t> rest(spec.prompt.begin() + from, spec.prompt.end());
  auto o = call(
      [&](CallCompletion c) { return ctl.forward(id, q, sequence(rest, from), std::move(c)); });
  t.first_token = Clock::now();
  t.tokens.push_back(t.first_token);
  for (auto& f : queued)
    if (CallOutcome o2 = f.get(); !o2) fail("request: call failed: {}", o2.message());
  if (spec.use_prefix_cache && (!hybrid || checkpoint)) {
    const size_t cached = hybrid ? at : spec.prompt.size();
    auto st = ctl.prefix_insert(id, std::span(spec.prompt).first(cached),
                                std::span(pages).first(cached / ps), 0, hybrid ? checkpoint : 0);
    if (!st) fail("request: prefix insert: {}", st.message());
  }
  int32_t next = o.forward.outputs[0].dist.ids[0];
  size_t pos = spec.prompt.size();
  for (int i = 1; i < spec.max_tokens; ++i) {
    o = call(
        [&](CallCompletion c) { return ctl.forward(id, q, sequence({next}, pos), std::move(c)); });
    t.tokens.push_back(Clock::now());
    next = o.forward.outputs[0].dist.ids[0];
    ++pos;
  }
  t.done = Clock::now();
  ctl.release_instance(id);
  return t;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * double(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace pith::bench
