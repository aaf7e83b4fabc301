// The recurrent states of hybrid models on the controller's side (Controller methods; the
// handle spaces are resource_states.cpp): allocation that waits when the pool is short, like a
// KV allocation under the suspend policy, forks, exports, and the dispatcher's walk over the
// waiters.
//
// Waiting: an allocation the pool cannot satisfy (after evicting unused prefix-cache
// checkpoints) answers Status::Waiting when someone else holds states it will give back; the
// runtime parks the guest. Between batches the dispatcher wakes the waiters, oldest first, once
// enough states are free; a woken instance calls again (the states are not reserved, so it may
// wait again). An instance that fails fast or cannot be woken, and one whose wait nobody could
// ever end (every other holder waits too, or there is none), gets OutOfStates at once.
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
      !others_hold_states_locked(id))
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

bool Controller::others_hold_states_locked(InstanceId id) const {
  for (InstanceId other : spaces_.instance_ids())
    if (other != id && spaces_.states_held(other) > 0) {
      auto w = state_waits_.find(other);
      if (w == state_waits_.end() || w->second.ready || w->second.refused) return true;
    }
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
  std::vector<std::pair<int64_t, InstanceId>> order;  // oldest first
  for (const auto& [id, w] : state_waits_)
    if (!w.ready && !w.refused) order.emplace_back(w.since_ns, id);
  std::sort(order.begin(), order.end());
  bool blocked = false;
  const int64_t now = now_ns();
  for (const auto& [since, id] : order) {
    StateWait& w = state_waits_.at(id);
    // Beyond what earlier waiters were promised (ready ones count until they take their states).
    if (states_available_locked() < w.n) make_room_locked(id, Pool::States, w.n, now);
    if (states_available_locked() >= w.n) {
      w.ready = true;
      counters_.state_wait_ns += static_cast<uint64_t>(now - since);
      wake_locked(id, wakes);
      continue;
    }
    if (!others_hold_states_locked(id)) {
      w.refused = Failure{
          Status::OutOfStates,
          fmt::format("{} recurrent states requested while holding {}: every other state is "
                      "held by instances that wait too ({} free of {}, --state-memory)",
                      w.n, spaces_.states_held(id), spaces_.states_free(),
                      spaces_.state_capacity())};
      wake_locked(id, wakes);
      continue;
    }
    blocked = true;
    break;  // in order: a larger request is not overtaken by smaller ones behind it
  }
  return blocked;
}

}  // namespace pith
