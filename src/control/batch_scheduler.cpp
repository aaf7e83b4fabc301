#include "control/batch_scheduler.h"

#include <algorithm>
#include <limits>

namespace pith {

const char* call_type_name(CallType t) {
  switch (t) {
    case CallType::Forward: return "forward";
    case CallType::EmbedTokens: return "embed_tokens";
    case CallType::NextDist: return "next_dist";
    case CallType::CopyKv: return "copy_kv";
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

  auto fits = [&](const CallInfo& c) {
    if (plan.n_calls == 0) return true;  // a lone oversized call still runs
    if (limits.max_calls && plan.n_calls + 1 > limits.max_calls) return false;
    if (limits.max_tokens && plan.n_tokens + c.n_tokens > limits.max_tokens) return false;
    if (limits.max_seqs && plan.n_seqs + c.n_seqs > limits.max_seqs) return false;
    return true;
  };

  // 3. Take each queue's head, then its non-conflicting same-type successors (vertical),
  //    until the limits cut the tail.
  bool full = false;
  for (const QueueView* q : order) {
    if (full) break;
    uint32_t taken = 0;
    for (const auto& c : q->pending) {
      if (c.type != plan.type) break;
      if (taken > 0 && conflicts(c, q->pending.subspan(0, taken))) break;
      if (!fits(c)) {
        full = true;
        break;
      }
      ++taken;
      ++plan.n_calls;
      plan.n_tokens += c.n_tokens;
      plan.n_seqs += c.n_seqs;
    }
    if (taken > 0) plan.takes.emplace_back(q->queue_id, taken);
  }
  return plan;
}

}  // namespace pith
