// The recurrent states of hybrid models on the controller's side (Controller methods; the
// handle spaces are resource_states.cpp): allocation that waits when the pool is short, like a
// KV allocation under the suspend policy, forks, exports, and the dispatcher's walk over the
// waiters.
//
// Waiting: an allocation the pool cannot satisfy (after evicting unused prefix-cache
// checkpoints) answers Status::Waiting when someone else holds states it will give back; the
// runtime parks the guest. Between batches the dispatcher takes the waiters highest rank first:
// it makes room (evicting checkpoints, suspending holders the waiter outranks or that sit
// idle), wakes the waiter once enough states are free, and refuses it (OutOfStates) when that
// failed and no other holder could still give states back (every other one waits too, or there
// is none). An instance that fails fast or cannot be woken, and one asking while no other
// resident instance holds a state, gets OutOfStates at once. (A first version refused at the
// call whenever every other holder waited, before trying to make room: on a busy hybrid server
// most tree-of-thought instances failed that way.)
// Like a KV wait, a state wait may suspend instances it outranks or that sit idle
// (kv_suspension.cpp: their private states, and pages, go to host memory and come back into
// fresh slots when they resume); otherwise the holders it waits for are the ones that end or
// deallocate.
#include <fmt/format.h>

#include <algorithm>

#include "control/controller.h"

namespace pith {

namespace {

Failure waiting_for_states() {
  return {Status::Waiting, "waiting for recurrent states"};
}

}  // namespace

Result<void> Controller::alloc_states(InstanceId id, uint32_t n, std::vector<uint32_t>& handles) {
  std::lock_guard lock(mu_);
  // A suspended instance waits: a slot handed to it now could be one of its own stale ids, and
  // the resume's rewrite of stale ids would then alias the new handle to a restored state.
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (auto w = state_waits_.find(id); w != state_waits_.end()) {
    if (!w->second.ready && !w->second.refused) return waiting_for_states();
    StateWait wait = std::move(w->second);
    state_waits_.erase(w);
    if (wait.refused) return *wait.refused;
  }
  if (auto client = kv_clients_.find(id); client != kv_clients_.end())
    client->second.last_active_ns = now_ns();
  auto r = spaces_.alloc_states(id, n, handles, states_promised_locked());
  if (r) {
    // Emptied by the dispatcher before the next batch runs: no call can name them before that.
    const HandleTable& table = *spaces_.state_table(id);
    for (uint32_t h : handles) states_to_clear_.push_back(*table.lookup(h));
    return {};
  }
  if (r.code() != Status::OutOfStates || n > spaces_.state_capacity() ||
      !spaces_.check_state_quota(id, n))
    return r;
  auto client = kv_clients_.find(id);
  if (client == kv_clients_.end() || !client->second.wake || client->second.fail_fast ||
      !others_hold_states_locked(id, /*count_waiters=*/true))
    return r;
  state_waits_[id] = StateWait{n, now_ns(), false, std::nullopt};
  work_cv_.notify_one();
  return waiting_for_states();
}

Result<void> Controller::dealloc_states(InstanceId id, std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  // A suspended instance's states may be in host memory, their slot ids stale: it waits.
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (!state_waits_.empty()) work_cv_.notify_one();
  return spaces_.dealloc_states(id, handles);
}

Result<void> Controller::copy_state(InstanceId id, QueueId q, uint32_t src_handle,
                                    uint32_t dst_handle, CallCompletion done) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (!find_queue(id, q)) return Failure{Status::BadHandle, fmt::format("unknown queue {}", q)};
  return submit(id, q, build_copy_state(*spaces_.state_table(id), src_handle, dst_handle),
                std::move(done));
}

Result<void> Controller::export_state(InstanceId id, const std::string& name, uint32_t handle,
                                      bool persistent) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  return spaces_.export_state(id, name, handle, persistent);
}

Result<uint32_t> Controller::import_state(InstanceId id, const std::string& name) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r.failure();  // as alloc_states
  return spaces_.import_state(id, name);
}

Result<void> Controller::remove_state_export(const std::string& name) {
  std::lock_guard lock(mu_);
  return spaces_.remove_state_export(name);
}

bool Controller::others_hold_states_locked(InstanceId id, bool count_waiters) const {
  // A holder that does not wait gives states back by running on (freeing, ending); a waiting one
  // only by being suspended, which making room has already tried when count_waiters is false.
  for (InstanceId other : spaces_.instance_ids())
    if (other != id && !spaces_.suspended(other) && spaces_.states_held(other) > 0) {
      auto w = state_waits_.find(other);
      if (count_waiters || w == state_waits_.end() || w->second.ready || w->second.refused)
        return true;
    }
  // (States promised to a woken waiter do not count: that waiter may be suspended before it
  // takes them, and counting them let 8 graph-of-thought instances wait on each other forever.)
  return false;
}

bool Controller::state_waiter_ahead_locked(InstanceId id) const {
  const KvRank mine = rank_locked(id);
  for (const auto& [other, w] : state_waits_)
    if (other != id && !w.ready && !w.refused && outranks(rank_locked(other), mine)) return true;
  return false;
}

uint32_t Controller::states_promised_locked() const {
  uint32_t n = 0;
  for (const auto& [_, w] : state_waits_)
    if (w.ready && !w.refused) n += w.n;
  return n;
}

uint32_t Controller::states_available_locked() const {
  const uint32_t free = spaces_.states_free(), promised = states_promised_locked();
  return free > promised ? free - promised : 0;
}

bool Controller::relieve_state_waits_locked(Deferred& wakes) {
  if (state_waits_.empty()) return false;
  // Highest rank first, as KV waiters: it may suspend the holders it outranks, so a lower-ranked
  // waiter in front could only block it.
  std::vector<InstanceId> order;
  for (const auto& [id, w] : state_waits_)
    if (!w.ready && !w.refused) order.push_back(id);
  std::sort(order.begin(), order.end(),
            [&](InstanceId a, InstanceId b) { return outranks(rank_locked(a), rank_locked(b)); });
  bool blocked = false;
  const int64_t now = now_ns();
  for (InstanceId id : order) {
    StateWait& w = state_waits_.at(id);
    const int64_t since = w.since_ns;
    // Beyond what earlier waiters were promised (ready ones count until they take their states).
    if (states_available_locked() < w.n) make_room_locked(id, Pool::States, w.n, now);
    if (states_available_locked() >= w.n) {
      w.ready = true;
      counters_.state_wait_ns += static_cast<uint64_t>(now - since);
      wake_locked(id, wakes);
      continue;
    }
    if (!others_hold_states_locked(id, /*count_waiters=*/false)) {
      w.refused = Failure{
          Status::OutOfStates,
          fmt::format("{} recurrent states requested while holding {}: every other state is "
                      "held by instances that wait too and cannot be suspended for it ({} free "
                      "of {}, --state-memory)",
                      w.n, spaces_.states_held(id), spaces_.states_free(),
                      spaces_.state_capacity())};
      wake_locked(id, wakes);
      continue;
    }
    blocked = true;
    break;  // in rank order: a lower-ranked request does not overtake it
  }
  return blocked;
}

}  // namespace pith
