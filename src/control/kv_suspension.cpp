// KV pressure under the suspend policy (contention_policy.h): admission of allocations that do not
// fit, suspension of instances to host memory and their resumption. Controller methods; the
// queues, dispatcher and resource calls are in controller.cpp.
//
// How it runs: an allocation of pages or recurrent states that does not fit (or that a
// better-ranked instance is already waiting ahead of) registers a wait and answers
// Status::Waiting; the runtime parks the guest. Between batches (nothing in flight, so every
// reference a queued call holds is known) the dispatcher walks everyone that wants pages or
// states — waiting allocations of either pool and suspended instances — in one walk, best rank
// first: it makes room by evicting prefix-cache entries and suspending instances the wanting one
// outranks or that sit idle, then resumes or grants (reserving the pages, promising the states)
// and wakes the instance. The walk stops at the first one that still does not fit while a running
// instance could still give back what it lacks, so a large request is not starved by smaller
// ones behind it; what no running instance could ever give back is refused (a wait) or left for
// later (a suspended instance) without holding up the rest. One walk for both pools: with one
// per pool, a state waiter could wait for a holder that waited for pages behind a suspended
// instance that waited for the state waiter.
//
// Suspending an instance saves the pages and recurrent states only it references (its handles and
// its queued calls) through the backend, frees them and skips its queues; its other calls that
// touch pages or states answer Waiting. Resuming takes fresh pages and states, loads the images
// and rewrites the instance's handles and queued calls from the old ids to the new ones.
//
// Under recompute preemption the pages that have a recipe (kv_provenance.h) are not saved but
// dropped: resuming gives them fresh pages too, and a restore queue of the controller's own, at
// the highest priority, runs the forwards that rebuild them (batched with everyone else's work
// and chunked like any prefill). The instance stays parked until the last one completes.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "control/contention_policy.h"
#include "control/controller.h"

namespace pith {

namespace {

Failure waiting() {
  return {Status::Waiting, "waiting for KV memory"};
}

using IdMap = std::unordered_map<uint32_t, uint32_t>;

// Rewrites a queued call's page and state ids after a swap-in (pages, states, copy ends,
// references, and the scheduler's conflict sets, where states carry kStateTag).
void relocate(PendingCall& call, CallInfo& info, const IdMap& moved, const IdMap& moved_states) {
  auto fix = [](const IdMap& map, uint32_t& id) {
    auto it = map.find(id);
    if (it != map.end()) id = it->second;
  };
  auto fix_tagged = [&](uint32_t& id) {
    if (id & kEmbedTag) return;
    if (!(id & kStateTag)) return fix(moved, id);
    uint32_t s = id & ~kStateTag;
    fix(moved_states, s);
    id = s | kStateTag;
  };
  for (uint32_t& p : call.held_pages) fix(moved, p);
  for (uint32_t& s : call.held_states) fix(moved_states, s);
  for (uint32_t& p : info.reads) fix_tagged(p);
  for (uint32_t& p : info.writes) fix_tagged(p);
  if (auto* f = std::get_if<ForwardCall>(&call.call)) {
    for (uint32_t& p : f->seq.kv_pages) fix(moved, p);
    if (f->seq.state_slot != SequenceInput::kNoState) fix(moved_states, f->seq.state_slot);
  } else if (auto* c = std::get_if<CopyKvCall>(&call.call)) {
    fix(moved, c->src);
    fix(moved, c->dst);
  } else if (auto* cs = std::get_if<CopyStateCall>(&call.call)) {
    fix(moved_states, cs->src);
    fix(moved_states, cs->dst);
  }
}

}  // namespace

// ---------------------------------------------------------------- the instance side

void Controller::set_waker(InstanceId id, std::function<void()> wake) {
  std::lock_guard lock(mu_);
  if (!spaces_.has_instance(id)) return;
  KvClient& client = kv_clients_[id];
  client.wake = std::move(wake);
  client.last_active_ns = now_ns();
}

void Controller::set_fail_fast(InstanceId id, bool fail_fast) {
  std::lock_guard lock(mu_);
  if (!spaces_.has_instance(id)) return;
  kv_clients_[id].fail_fast = fail_fast;
}

Result<void> Controller::resident_or_wait_locked(InstanceId id) {
  if (!spaces_.has_instance(id)) return Failure{Status::Terminated, "unknown instance"};
  if (spaces_.suspended(id) || restoring(id)) return waiting();
  return {};
}

uint32_t Controller::pages_available_locked() const {
  return spaces_.pages_free() - reserved_pages_;
}

KvRank Controller::rank_locked(InstanceId id) const {
  KvRank r{0, spaces_.launch_seq(id)};
  bool any = false;
  for (QueueId q : spaces_.queues_of(id)) {
    auto it = queues_.find(q);
    if (it == queues_.end()) continue;
    r.priority = any ? std::max(r.priority, it->second.priority) : it->second.priority;
    any = true;
  }
  return r;
}

bool Controller::wanting_ahead_locked(InstanceId id) const {
  const auto& suspended = spaces_.suspended_instances();
  if (alloc_waits_.empty() && state_waits_.empty() && suspended.empty()) return false;
  const KvRank mine = rank_locked(id);
  auto ahead = [&](InstanceId other) { return other != id && outranks(rank_locked(other), mine); };
  for (const auto& [other, w] : alloc_waits_)
    if (!w.granted && !w.refused && ahead(other)) return true;
  for (const auto& [other, w] : state_waits_)
    if (!w.ready && !w.refused && ahead(other)) return true;
  for (InstanceId other : suspended)
    if (ahead(other)) return true;
  return false;
}

bool Controller::waiting_locked(InstanceId id) const {
  auto p = alloc_waits_.find(id);
  if (p != alloc_waits_.end() && !p->second.granted && !p->second.refused) return true;
  auto s = state_waits_.find(id);
  return s != state_waits_.end() && !s->second.ready && !s->second.refused;
}

Result<void> Controller::alloc_or_wait_locked(InstanceId id, uint32_t n,
                                              std::vector<uint32_t>& handles) {
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (auto quota = spaces_.check_quota(id, n); !quota) return quota;
  const int64_t now = now_ns();
  KvClient* client = nullptr;
  if (auto it = kv_clients_.find(id); it != kv_clients_.end()) {
    client = &it->second;
    client->last_active_ns = now;
  }
  if (auto w = alloc_waits_.find(id); w != alloc_waits_.end()) {
    AllocWait wait = std::move(w->second);
    if (!wait.granted && !wait.refused) return waiting();
    alloc_waits_.erase(w);
    counters_.kv_wait_ns += static_cast<uint64_t>(now - wait.since_ns);
    if (wait.refused) return *wait.refused;
    reserved_pages_ -= wait.n;
    if (wait.n == n) return spaces_.alloc_pages(id, n, {}, handles);
    // A different request than the one granted (not a guest parked in one call): judge it anew.
  }
  const uint32_t capacity = backend_.page_slots().capacity();
  if (n > capacity)
    return Failure{Status::OutOfKvPages,
                   fmt::format("{} pages requested, the whole pool has {}", n, capacity)};
  if (!wanting_ahead_locked(id)) {
    if (pages_available_locked() < n) spaces_.evict_cached(n - pages_available_locked());
    if (pages_available_locked() >= n) return spaces_.alloc_pages(id, n, {}, handles);
  }
  if (!client || !client->wake || client->fail_fast)
    return Failure{Status::OutOfKvPages,
                   fmt::format("{} pages requested, {} free of {} (this instance fails fast)", n,
                               pages_available_locked(), capacity)};
  alloc_waits_[id] = AllocWait{n, false, now, std::nullopt};
  work_cv_.notify_one();
  return waiting();
}

void Controller::forget_kv_client_locked(InstanceId id) {
  state_waits_.erase(id);
  if (auto w = alloc_waits_.find(id); w != alloc_waits_.end()) {
    if (w->second.granted) reserved_pages_ -= w->second.n;
    alloc_waits_.erase(w);
  }
  kv_clients_.erase(id);
}

// ---------------------------------------------------------------- the dispatcher side

void Controller::wake_locked(InstanceId id, Deferred& wakes) {
  auto it = kv_clients_.find(id);
  if (it != kv_clients_.end() && it->second.wake) wakes.push_back(it->second.wake);
}

void Controller::private_pages_locked(InstanceId id, std::vector<uint32_t>& pages,
                                      std::vector<uint32_t>& refs,
                                      std::vector<uint32_t>* visible) const {
  const std::vector<uint32_t> pending = queued_refs_locked(id, &PendingCall::held_pages);
  spaces_.private_pages(id, pending, pages, refs);
  if (visible) {
    *visible = pending;
    if (const HandleTable* table = spaces_.page_table(id))
      table->for_each([&](uint32_t, uint32_t phys) { visible->push_back(phys); });
  }
}

void Controller::private_states_locked(InstanceId id, std::vector<uint32_t>& states,
                                       std::vector<uint32_t>& refs) const {
  spaces_.private_states(id, queued_refs_locked(id, &PendingCall::held_states), states, refs);
}

std::vector<uint32_t> Controller::queued_refs_locked(
    InstanceId id, std::vector<uint32_t> PendingCall::*held) const {
  std::vector<uint32_t> refs;
  for (QueueId q : spaces_.queues_of(id)) {
    auto it = queues_.find(q);
    if (it == queues_.end()) continue;
    for (const auto& call : it->second.calls)
      refs.insert(refs.end(), ((*call).*held).begin(), ((*call).*held).end());
  }
  return refs;
}

void Controller::suspend_locked(InstanceId victim) {
  ResourceSpaces::SwapOut out;
  std::vector<uint32_t> visible;
  std::vector<uint32_t>& pages = out.pages;
  private_pages_locked(victim, pages, out.page_refs, provenance_ ? &visible : nullptr);
  private_states_locked(victim, out.states, out.state_refs);
  if (pages.empty() && out.states.empty()) return;
  // Recompute preemption: the pages with a recipe go last and are dropped, not saved.
  size_t n_saved = pages.size();
  if (provenance_) {
    const std::vector<bool> replay = provenance_->replayable(pages, visible);
    std::vector<uint32_t> order(pages.size());
    size_t front = 0, back = pages.size();
    for (size_t i = 0; i < pages.size(); ++i) order[replay[i] ? --back : front++] = uint32_t(i);
    std::vector<uint32_t> ordered_pages(pages.size()), ordered_refs(pages.size());
    for (size_t i = 0; i < order.size(); ++i) {
      ordered_pages[i] = pages[order[i]];
      ordered_refs[i] = out.page_refs[order[i]];
    }
    pages = std::move(ordered_pages);
    out.page_refs = std::move(ordered_refs);
    n_saved = front;
  }
  const std::span<const uint32_t> saved(pages.data(), n_saved);
  const size_t bytes = n_saved * backend_.kv_page_bytes();
  const size_t state_bytes = out.states.size() * backend_.state_bytes();
  if (spaces_.swap_bytes() + bytes + state_bytes > options_.swap_bytes)
    return;  // host swap space is full
  out.page_image.resize(bytes);
  out.state_image.resize(state_bytes);
  const int64_t t0 = now_ns();
  try {
    if (!out.states.empty() && !states_to_clear_.empty()) {
      // A state allocated since the last batch is still uncleared: empty it now (those still
      // allocated, as take_locked does), or its image would carry a previous owner's contents
      // into the fresh slot.
      std::vector<uint32_t> clear;
      for (uint32_t st : states_to_clear_)
        if (spaces_.state_refs().count(st) > 0) clear.push_back(st);
      std::sort(clear.begin(), clear.end());
      clear.erase(std::unique(clear.begin(), clear.end()), clear.end());
      backend_.clear_states(clear);
      states_to_clear_.clear();
    }
    if (n_saved > 0) backend_.save_kv_pages(saved, out.page_image);
    if (!out.states.empty()) backend_.save_states(out.states, out.state_image);
  } catch (const std::exception&) {
    return;  // the instance keeps running; the one that wanted pages or states waits longer
  }
  counters_.swap_ns += now_ns() - t0;
  if (provenance_) {
    std::vector<DetachedPage> detached = provenance_->detach(pages);
    detached.erase(detached.begin(), detached.begin() + static_cast<ptrdiff_t>(n_saved));
    counters_.pages_dropped += detached.size();
    if (!detached.empty()) dropped_[victim] = std::move(detached);
  }
  counters_.states_swapped_out += out.states.size();
  spaces_.swap_out(victim, std::move(out));
  if (auto w = alloc_waits_.find(victim); w != alloc_waits_.end() && w->second.granted) {
    reserved_pages_ -= w->second.n;  // asks again once it is back
    w->second.granted = false;
  }
  // Likewise a promise of states: a suspended instance cannot take them, and holding them for it
  // left the one instance still running refused with states free.
  if (auto w = state_waits_.find(victim); w != state_waits_.end()) w->second.ready = false;
  ++counters_.suspensions;
  counters_.pages_swapped_out += n_saved;
}

void Controller::end_instance_locked(InstanceId id, const std::string& why, Deferred& deferred) {
  // The kill runs before the completions release_instance_locked defers: a guest woken by a
  // cancelled call must find itself already ended, not report the cancellation as its failure.
  KillFn kill = spaces_.take_on_kill(id);
  if (kill) deferred.push_back([kill = std::move(kill), why] { kill(why); });
  release_instance_locked(id, deferred);
}

bool Controller::resume_locked(InstanceId id, Deferred& deferred) {
  ResourceSpaces::SwapIn in = spaces_.swap_in(id);
  // Queued calls move to the fresh ids first, so that every reference is consistent whatever
  // the load does.
  IdMap moved, moved_states;
  for (size_t i = 0; i < in.stale.size(); ++i) moved.emplace(in.stale[i], in.fresh[i]);
  for (size_t i = 0; i < in.stale_states.size(); ++i)
    moved_states.emplace(in.stale_states[i], in.fresh_states[i]);
  for (QueueId q : spaces_.queues_of(id)) {
    auto it = queues_.find(q);
    if (it == queues_.end()) continue;
    Queue& queue = it->second;
    for (size_t i = 0; i < queue.calls.size(); ++i)
      relocate(*queue.calls[i], queue.infos[i], moved, moved_states);
  }
  // The saved pages come first (suspend_locked), the dropped ones after them.
  const size_t n_saved = in.image.size() / backend_.kv_page_bytes();
  const int64_t t0 = now_ns();
  try {
    if (n_saved > 0) backend_.load_kv_pages(std::span(in.fresh).first(n_saved), in.image);
    if (!in.fresh_states.empty()) backend_.load_states(in.fresh_states, in.state_image);
  } catch (const std::exception& e) {
    // Its K/V or state is gone: end it with the reason rather than let it compute on garbage.
    end_instance_locked(
        id,
        fmt::format("its KV pages or recurrent states could not be restored after a suspension "
                    "({})",
                    e.what()),
        deferred);
    return false;
  }
  // A fresh slot may have been freed with an emptying still pending (an allocation no batch
  // followed): it holds a loaded state now, which that emptying must not wipe.
  if (!in.fresh_states.empty() && !states_to_clear_.empty())
    std::erase_if(states_to_clear_, [&](uint32_t st) {
      return std::find(in.fresh_states.begin(), in.fresh_states.end(), st) != in.fresh_states.end();
    });
  counters_.swap_ns += now_ns() - t0;
  ++counters_.resumes;
  counters_.pages_swapped_in += n_saved;
  counters_.states_swapped_in += in.fresh_states.size();
  if (provenance_) {
    for (size_t i = 0; i < n_saved; ++i) provenance_->on_opaque_write(in.fresh[i]);
    if (auto d = dropped_.find(id); d != dropped_.end()) {
      std::vector<DetachedPage> dropped = std::move(d->second);
      dropped_.erase(d);
      std::optional<ReplayPlan> plan = provenance_->replay_plan(std::move(dropped), moved);
      if (!plan) {
        end_instance_locked(id,
                            "a KV page it shared with another instance was rewritten while it "
                            "was suspended, so its own pages could not be recomputed",
                            deferred);
        return false;
      }
      start_restore_locked(id, std::move(*plan));
    }
  }
  // Its guest has been parked all along: give it time to run before it can count as idle.
  if (auto it = kv_clients_.find(id); it != kv_clients_.end()) it->second.last_active_ns = now_ns();
  return true;
}

void Controller::make_room_locked(InstanceId requester, Pool pool, size_t need, int64_t now) {
  const bool states = pool == Pool::States;
  auto available = [&]() -> size_t {
    return states ? states_available_locked() : pages_available_locked();
  };
  if (available() < need) {
    const auto short_by = static_cast<uint32_t>(need - available());
    if (states)
      spaces_.evict_state_checkpoints(short_by);
    else
      spaces_.evict_cached(short_by);
  }
  if (available() >= need) return;
  std::vector<SuspendCandidate> candidates;
  std::vector<uint32_t> ids, refs;
  size_t could_free = 0;
  for (const auto& [id, client] : kv_clients_) {
    if (id == requester || !client.wake || spaces_.suspended(id) || restoring(id)) continue;
    if (states)
      private_states_locked(id, ids, refs);
    else
      private_pages_locked(id, ids, refs);
    candidates.push_back({id, rank_locked(id), ids.size(), idle_ns_locked(id, now)});
  }
  const KvRank rank = rank_locked(requester);
  std::vector<uint64_t> order = suspension_order(candidates, rank, options_.idle_suspend_ns);
  for (uint64_t id : order)
    for (const auto& c : candidates)
      if (c.id == id) could_free += c.frees;
  // Suspending them all would not be enough: leave them running and wait for more to free up.
  if (available() + could_free < need) return;
  for (uint64_t victim : order) {
    if (available() >= need) break;
    suspend_locked(victim);
  }
}

int64_t Controller::idle_ns_locked(InstanceId id, int64_t now) const {
  if (alloc_waits_.count(id) || state_waits_.count(id)) return -1;
  for (QueueId q : spaces_.queues_of(id)) {
    auto it = queues_.find(q);
    if (it != queues_.end() && !it->second.calls.empty()) return -1;
  }
  auto it = kv_clients_.find(id);
  return it == kv_clients_.end() ? -1 : now - it->second.last_active_ns;
}

bool Controller::running_others_hold_locked(InstanceId id, Pool pool) const {
  // A running instance gives pages and states back by going on (freeing, ending); a waiting or
  // suspended one only by being suspended, which making room has already tried.
  const bool states = pool == Pool::States;
  for (InstanceId other : spaces_.instance_ids()) {
    if (other == id || spaces_.suspended(other) || waiting_locked(other)) continue;
    if ((states ? spaces_.states_held(other) : spaces_.pages_held(other)) > 0) return true;
  }
  // What is reserved for a woken waiter is as good as held: it takes it when it runs again.
  if (states) {
    for (const auto& [other, w] : state_waits_)
      if (other != id && w.ready) return true;
  } else {
    for (const auto& [other, w] : alloc_waits_)
      if (other != id && w.granted) return true;
  }
  return false;
}

bool Controller::relieve_pressure_locked(Deferred& deferred) {
  const auto& suspended = spaces_.suspended_instances();
  if (alloc_waits_.empty() && state_waits_.empty() && suspended.empty()) return false;
  const int64_t now = now_ns();
  // One walk over both pools, best rank first: separate walks let a state waiter wait for a
  // holder that waits for pages behind an instance that waits for that state waiter.
  std::vector<InstanceId> wanting(suspended.begin(), suspended.end());
  for (const auto& [id, w] : alloc_waits_)
    if (!w.granted && !w.refused && !suspended.count(id)) wanting.push_back(id);
  for (const auto& [id, w] : state_waits_)
    if (!w.ready && !w.refused && !suspended.count(id) &&
        std::find(wanting.begin(), wanting.end(), id) == wanting.end())
      wanting.push_back(id);
  std::sort(wanting.begin(), wanting.end(),
            [&](InstanceId a, InstanceId b) { return outranks(rank_locked(a), rank_locked(b)); });
  bool blocked = false;
  for (InstanceId id : wanting) {
    auto pw = alloc_waits_.find(id);
    AllocWait* page_wait = pw != alloc_waits_.end() && !pw->second.granted && !pw->second.refused
                               ? &pw->second
                               : nullptr;
    auto sw = state_waits_.find(id);
    StateWait* state_wait = sw != state_waits_.end() && !sw->second.ready && !sw->second.refused
                                ? &sw->second
                                : nullptr;
    // A suspended instance needs its pages and states back as well as what it asked for.
    size_t need_pages = spaces_.swapped_pages(id) + (page_wait ? page_wait->n : 0);
    size_t need_states = spaces_.swapped_states(id) + (state_wait ? state_wait->n : 0);
    if (need_states > 0) make_room_locked(id, Pool::States, need_states, now);
    if (need_pages > 0) make_room_locked(id, Pool::Pages, need_pages, now);
    bool woken = false;
    // What it asked for and no running instance could ever give back is refused: everyone else
    // that holds some waits (behind it, or it could have suspended them) or is suspended.
    if (state_wait && states_available_locked() < need_states &&
        !running_others_hold_locked(id, Pool::States)) {
      state_wait->refused = Failure{
          Status::OutOfStates,
          fmt::format("{} recurrent states requested while holding {}: more than the pool of {} "
                      "can give this instance ({} free; the rest held by instances that wait or "
                      "are suspended and cannot be suspended for it, exports and checkpoints in "
                      "use; --state-memory)",
                      state_wait->n, spaces_.states_held(id), spaces_.state_capacity(),
                      spaces_.states_free())};
      need_states -= state_wait->n;
      state_wait = nullptr;
      woken = true;
    }
    if (page_wait && pages_available_locked() < need_pages &&
        !running_others_hold_locked(id, Pool::Pages)) {
      page_wait->refused = Failure{
          Status::OutOfKvPages,
          fmt::format("{} pages requested while holding {}: more than the pool of {} can give "
                      "this instance ({} free, the rest held by exports, cached prefixes and "
                      "instances that wait or are suspended)",
                      page_wait->n, spaces_.pages_held(id), backend_.page_slots().capacity(),
                      pages_available_locked())};
      ++counters_.kv_refused;
      need_pages -= page_wait->n;
      page_wait = nullptr;
      woken = true;
    }
    const bool short_states = states_available_locked() < need_states;
    const bool short_pages = pages_available_locked() < need_pages;
    if (short_states || short_pages) {
      if (woken) wake_locked(id, deferred);
      blocked = true;
      // In rank order: a lower-ranked instance does not overtake one that running instances
      // will make room for. (One that no running instance could make room for, a suspended one,
      // stays out without holding up the rest.)
      if ((!short_states || running_others_hold_locked(id, Pool::States)) &&
          (!short_pages || running_others_hold_locked(id, Pool::Pages)))
        break;
      continue;
    }
    if (spaces_.suspended(id) && !resume_locked(id, deferred)) continue;
    if (page_wait) {
      page_wait->granted = true;
      reserved_pages_ += page_wait->n;
    }
    if (state_wait) state_wait->ready = true;
    if (!restoring(id)) wake_locked(id, deferred);  // else when its recompute is done
  }
  return blocked;
}

// ---------------------------------------------------------------- recompute preemption

void Controller::record_batch_locked(Batch& batch) {
  const uint32_t ps = page_size();
  for (const auto& c : batch.calls) {
    if (auto* f = std::get_if<ForwardCall>(&c->call)) {
      provenance_->on_forward(f->seq);
      const SequenceInput& seq = f->seq;
      const size_t first = (context_slots(seq, ps) - seq.n_inputs()) / ps;
      batch.written.insert(batch.written.end(), seq.kv_pages.begin() + ptrdiff_t(first),
                           seq.kv_pages.end());
    } else if (auto* e = std::get_if<EmbedTokensCall>(&c->call)) {
      provenance_->on_embed_tokens(e->tokens, e->slots);
    } else if (auto* k = std::get_if<CopyKvCall>(&c->call)) {
      provenance_->on_opaque_write(k->dst);
    }
  }
}

void Controller::start_restore_locked(InstanceId id, ReplayPlan plan) {
  if (plan.sequences.empty()) return;
  const QueueId qid = next_queue_id_++;
  Queue& queue = queues_[qid];
  queue.owner = id;
  queue.restore = true;
  queue.priority = std::numeric_limits<int32_t>::max();  // before any work of anyone
  const int64_t now = now_ns();
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    SequenceInput& seq = plan.sequences[i];
    auto call = std::make_shared<PendingCall>();
    CallInfo info;
    info.id = next_call_id_++;
    info.type = CallType::Forward;
    info.n_tokens = static_cast<uint32_t>(seq.n_inputs());
    info.splittable = seq.n_inputs() > 1;
    info.writes = plan.writes[i];
    for (uint32_t p : seq.kv_pages)
      if (std::find(info.writes.begin(), info.writes.end(), p) == info.writes.end())
        info.reads.push_back(p);
    info.enqueued_ns = call->enqueued_ns = now;
    call->owner = id;
    call->queue = qid;
    call->held_pages = seq.kv_pages;
    spaces_.page_refs().retain(call->held_pages);
    call->call = ForwardCall{std::move(seq), nullptr};
    queue.infos.push_back(std::move(info));
    queue.calls.push_back(std::move(call));
    ++queue.submitted;
  }
  counters_.tokens_recomputed += plan.tokens;
  restoring_[id] = Restore{qid, now};
  work_cv_.notify_one();
}

void Controller::record_outcome_locked(const Batch& batch, Deferred& deferred) {
  bool failed = false;
  std::vector<std::pair<InstanceId, std::string>> broken;  // restores that failed
  for (const auto& c : batch.calls) {
    if (c->outcome.ok()) continue;
    failed = true;
    if (auto* e = std::get_if<EmbedTokensCall>(&c->call))
      for (uint32_t slot : e->slots) provenance_->on_embed_overwritten(slot);
    if (restoring(c->owner) && restoring_.at(c->owner).queue == c->queue)
      broken.emplace_back(c->owner, c->outcome.failure().message);
  }
  if (failed)  // what the batch wrote is unknown
    for (uint32_t p : batch.written) provenance_->on_opaque_write(p);
  for (auto& [id, why] : broken)
    if (restoring(id))
      end_instance_locked(
          id, fmt::format("its KV pages could not be recomputed after a suspension ({})", why),
          deferred);
  // Restores whose last call completed: the instance runs again.
  for (const QueueTake& t : batch.plan.takes) {
    auto qit = queues_.find(t.queue_id);
    if (qit == queues_.end() || !qit->second.restore || !qit->second.calls.empty()) continue;
    const InstanceId id = qit->second.owner;
    queues_.erase(qit);
    if (auto r = restoring_.find(id); r != restoring_.end()) {
      counters_.recompute_ns += now_ns() - r->second.since_ns;
      restoring_.erase(r);
    }
    if (auto it = kv_clients_.find(id); it != kv_clients_.end())
      it->second.last_active_ns = now_ns();
    wake_locked(id, deferred);
  }
}

}  // namespace pith
