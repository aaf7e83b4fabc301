// When to send a batch to the backend (paper §6.1, Table 5). A policy is a tiny strategy: it
// looks at how many calls are eligible and how long the oldest has waited, and says
// "dispatch now" or "check again after this long". The batch itself is always formed by
// form_batch; the policy only times it (and eager caps it at one call).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "control/batch_scheduler.h"

namespace pith {

// What a policy sees when the backend is idle and at least one call is eligible.
struct DispatchState {
  size_t n_eligible = 0;            // queue heads ready to run
  int64_t oldest_wait_ns = 0;       // how long the oldest of them has waited
  size_t returning = 0;             // callers of the last batch that have not submitted again yet
  int64_t since_last_batch_ns = 0;  // time since the last batch completed
  int64_t last_backend_ns = 0;      // how long the last batch ran on the backend
};

struct DispatchDecision {
  bool dispatch = false;
  int64_t recheck_after_ns = -1;  // when not dispatching: wake up after this long (-1: on new work)
};

class DispatchPolicy {
 public:
  virtual ~DispatchPolicy() = default;
  virtual const char* name() const = 0;
  // Called only while the backend is idle and at least one call is eligible.
  virtual DispatchDecision decide(const DispatchState& s) const = 0;
  // Extra limits the policy imposes on batch formation.
  virtual BatchLimits limit(BatchLimits base) const { return base; }
};

// adaptive (default): work-conserving; as soon as the backend is idle, send everything
// eligible, so batches grow by themselves while the backend is busy. One refinement: right
// after a batch completes, its callers are still being resumed one by one (each inferlet
// samples and submits its next call), and dispatching the first one back alone would split
// the next step into a tiny batch and a big one. So while callers of the last batch are
// still on their way back, it waits for them, at most a quarter of the last batch's backend
// time (capped at 5 ms): bounded idle time for much fuller batches.
class AdaptivePolicy final : public DispatchPolicy {
 public:
  const char* name() const override { return "adaptive"; }
  DispatchDecision decide(const DispatchState& s) const override {
    if (s.returning == 0) return {true, -1};
    int64_t grace = std::min<int64_t>(s.last_backend_ns / 4, 5'000'000);
    if (s.since_last_batch_ns >= grace) return {true, -1};
    return {false, grace - s.since_last_batch_ns};
  }
};

// eager: no batching, one call per backend invocation.
class EagerPolicy final : public DispatchPolicy {
 public:
  const char* name() const override { return "eager"; }
  DispatchDecision decide(const DispatchState&) const override { return {true, -1}; }
  BatchLimits limit(BatchLimits base) const override {
    base.max_calls = 1;
    return base;
  }
};

// k: wait until K calls are eligible. With fewer than K live queues that would never happen,
// so a call that has waited `max_wait_ns` is sent anyway (documented deviation from a pure
// count trigger; the paper's K policy stalls the same way without it).
class CountPolicy final : public DispatchPolicy {
 public:
  CountPolicy(size_t k, int64_t max_wait_ns) : k_(k), max_wait_ns_(max_wait_ns) {}
  const char* name() const override { return "k"; }
  DispatchDecision decide(const DispatchState& s) const override {
    if (s.n_eligible >= k_ || s.oldest_wait_ns >= max_wait_ns_) return {true, -1};
    return {false, max_wait_ns_ - s.oldest_wait_ns};
  }

 private:
  size_t k_;
  int64_t max_wait_ns_;
};

// t: wait until the oldest eligible call has waited T.
class TimePolicy final : public DispatchPolicy {
 public:
  explicit TimePolicy(int64_t t_ns) : t_ns_(t_ns) {}
  const char* name() const override { return "t"; }
  DispatchDecision decide(const DispatchState& s) const override {
    if (s.oldest_wait_ns >= t_ns_) return {true, -1};
    return {false, t_ns_ - s.oldest_wait_ns};
  }

 private:
  int64_t t_ns_;
};

// Parses "adaptive", "eager", "k" / "k:32", "t" / "t:5" (milliseconds). Throws pith::Error.
std::unique_ptr<DispatchPolicy> make_dispatch_policy(const std::string& spec);

}  // namespace pith
