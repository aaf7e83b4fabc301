#include "control/batch_scheduler.h"

#include <algorithm>
#include <limits>

namespace pith {

const char* call_type_name(CallType t) {
  switch (t) {
    case CallType::Forward:
      return "forward";
    case CallType::EmbedTokens:
      return "embed_tokens";
    case CallType::NextDist:
      return "next_dist";
    case CallType::CopyKv:
      return "copy_kv";
    case CallType::CopyState:
      return "copy_state";
  }
  return "?";
}

size_t count_eligible(std::span<const QueueView> queues) {
  size_t n = 0;
  for (const auto& q : queues) n += q.pending.empty() ? 0 : 1;
  return n;
}

namespace {

bool intersects(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (uint32_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

// Whether `next` may join a batch that already holds `taken` calls of the same queue.
bool conflicts(const CallInfo& next, std::span<const CallInfo> taken) {
  for (const auto& t : taken) {
    if (intersects(next.writes, t.writes)) return true;  // two writes to one page
    if (intersects(next.reads, t.writes)) return true;   // reads what a batched call writes
    if (intersects(next.writes, t.reads)) return true;   // writes what a batched call reads
  }
  return false;
}

}  // namespace

BatchPlan form_batch(std::span<const QueueView> queues, const BatchLimits& limits) {
  BatchPlan plan;
  // 1. The type whose oldest eligible (head) call has waited longest.
  int64_t oldest[kNumCallTypes];
  std::fill(std::begin(oldest), std::end(oldest), std::numeric_limits<int64_t>::max());
  bool any = false;
  for (const auto& q : queues) {
    if (q.pending.empty()) continue;
    const auto& head = q.pending.front();
    auto t = static_cast<size_t>(head.type);
    oldest[t] = std::min(oldest[t], head.enqueued_ns);
    any = true;
  }
  if (!any) return plan;
  size_t type = 0;
  for (size_t t = 1; t < kNumCallTypes; ++t)
    if (oldest[t] < oldest[type]) type = t;
  plan.type = static_cast<CallType>(type);

  // 2. Queues whose head has that type: higher priority first, then older head first.
  std::vector<const QueueView*> order;
  for (const auto& q : queues)
    if (!q.pending.empty() && q.pending.front().type == plan.type) order.push_back(&q);
  std::stable_sort(order.begin(), order.end(), [](const QueueView* a, const QueueView* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    return a->pending.front().enqueued_ns < b->pending.front().enqueued_ns;
  });

  bool full = false;
  uint32_t max_tokens = limits.max_tokens;  // narrowed once decodes are in (3a)
  // Adds calls from the front of q (vertical batching); `accept` filters which calls this
  // pass may take. Splits the first call that overflows the token budget when allowed.
  auto take_from = [&](const QueueView& q, auto&& accept) {
    QueueTake take{q.queue_id, 0, 0};
    for (const auto& c : q.pending) {
      if (c.type != plan.type || !accept(c)) break;
      if (take.calls > 0 && conflicts(c, q.pending.subspan(0, take.calls))) break;
      bool over_calls = limits.max_calls && plan.n_calls + 1 > limits.max_calls;
      bool over_seqs = limits.max_seqs && plan.n_seqs + c.n_seqs > limits.max_seqs;
      bool over_tokens = max_tokens && plan.n_tokens + c.n_tokens > max_tokens;
      if (plan.n_calls > 0 && (over_calls || over_seqs)) {
        full = true;
        break;
      }
      if (over_tokens) {
        uint32_t room = max_tokens - std::min(plan.n_tokens, max_tokens);
        if (c.splittable && room > 0) {
          take.partial_tokens = room;
          ++plan.n_calls;
          plan.n_tokens += room;
          plan.n_seqs += c.n_seqs;
          full = true;
          break;
        }
        if (plan.n_calls > 0) {  // cut the tail; a lone unsplittable call still runs
          full = true;
          break;
        }
      }
      ++take.calls;
      ++plan.n_calls;
      plan.n_tokens += c.n_tokens;
      plan.n_seqs += c.n_seqs;
    }
    return take;
  };

  auto record = [&](const QueueTake& t) {
    if (t.calls > 0 || t.partial_tokens > 0) plan.takes.push_back(t);
    return t.calls > 0 || t.partial_tokens > 0;
  };
  if (plan.type == CallType::Forward && limits.formation == BatchFormation::DecodeFirst) {
    // 3a. Every single-token call first, then prefill calls (priority, then arrival order)
    //     into what is left of the budget.
    std::vector<bool> used(order.size(), false);
    for (size_t i = 0; i < order.size() && !full; ++i)
      used[i] = record(take_from(*order[i], [](const CallInfo& c) { return c.n_tokens <= 1; }));
    if (limits.tokens_with_decodes && plan.n_calls) {
      const uint32_t cap =
          std::max(limits.tokens_with_decodes, plan.n_tokens + limits.min_prefill_with_decodes);
      max_tokens = max_tokens ? std::min(max_tokens, cap) : cap;
      full = full || plan.n_tokens >= max_tokens;
    }
    if (const uint32_t threshold = limits.long_prefill_threshold) {
      // Short prefills before long ones.
      for (size_t i = 0; i < order.size() && !full; ++i)
        if (!used[i] && order[i]->pending.front().n_tokens <= threshold)
          used[i] = record(
              take_from(*order[i], [&](const CallInfo& c) { return c.n_tokens <= threshold; }));
    }
    for (size_t i = 0; i < order.size() && !full; ++i)
      if (!used[i]) record(take_from(*order[i], [](const CallInfo&) { return true; }));
  } else {
    // 3b. Strict priority / age order.
    for (size_t i = 0; i < order.size() && !full; ++i)
      record(take_from(*order[i], [](const CallInfo&) { return true; }));
  }
  return plan;
}

}  // namespace pith
