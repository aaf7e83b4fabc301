// The recurrent states of hybrid models on the controller's side (Controller methods; the
// handle spaces are resource_states.cpp): allocation that waits when the pool is short, like a
// KV allocation under the suspend policy, forks and exports.
//
// Waiting: an allocation the pool cannot satisfy (after evicting unused prefix-cache
// checkpoints), or that a better-ranked instance already waits ahead of, answers
// Status::Waiting and the runtime parks the guest. The dispatcher's walk over everyone that
// wants pages or states (kv_suspension.cpp, one walk for both pools, so that no wait in one
// pool holds up the other's in a cycle) makes room, promises the states and wakes the guest,
// or refuses it (OutOfStates) once no running instance holds a state it could give back. An
// instance that fails fast or cannot be woken gets OutOfStates at once, and so does one asking
// while no other instance holds a state or a promise of one (the pool is too small for it).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

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
  const int64_t now = now_ns();
  if (auto w = state_waits_.find(id); w != state_waits_.end()) {
    if (!w->second.ready && !w->second.refused) return waiting_for_states();
    StateWait wait = std::move(w->second);
    state_waits_.erase(w);
    counters_.state_wait_ns += static_cast<uint64_t>(now - wait.since_ns);
    if (wait.refused) return *wait.refused;
    // The promised states are among the free ones: the allocation below counts them out of the
    // promises (they are no longer promised once the wait is gone).
  }
  auto client = kv_clients_.find(id);
  if (client != kv_clients_.end()) client->second.last_active_ns = now;
  std::optional<Failure> short_of;  // the pool's answer, when it was asked
  if (!wanting_ahead_locked(id)) {
    auto r = spaces_.alloc_states(id, n, handles, states_promised_locked());
    if (r) {
      // Emptied by the dispatcher before the next batch runs: no call can name them before that.
      const HandleTable& table = *spaces_.state_table(id);
      for (uint32_t h : handles) states_to_clear_.push_back(*table.lookup(h));
      return {};
    }
    if (r.code() != Status::OutOfStates) return r;
    short_of = r.failure();
  }
  if (n > spaces_.state_capacity())
    return Failure{Status::OutOfStates,
                   fmt::format("{} recurrent states requested, the whole pool has {} "
                               "(--state-memory)",
                               n, spaces_.state_capacity())};
  if (auto quota = spaces_.check_state_quota(id, n); !quota) return quota;
  if (client == kv_clients_.end() || !client->second.wake || client->second.fail_fast ||
      !others_hold_states_locked(id)) {
    if (short_of) return *short_of;
    return Failure{Status::OutOfStates,
                   fmt::format("{} recurrent states requested, {} free of {} (--state-memory), "
                               "and instances that rank before this one wait for states or pages",
                               n, spaces_.states_free(), spaces_.state_capacity())};
  }
  state_waits_[id] = StateWait{n, now, false, std::nullopt};
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
    if (other != id && spaces_.states_held(other) > 0) return true;  // suspended ones too
  for (const auto& [other, w] : state_waits_)
    if (other != id && w.ready) return true;
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

}  // namespace pith
