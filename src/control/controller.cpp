#include "control/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "control/batch_execution.h"
#include "control/chunked_prefill.h"

namespace pith {

int64_t Controller::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

Failure unknown_instance() {
  return {Status::Terminated, "unknown instance"};
}
Failure unknown_queue(QueueId q) {
  return {Status::BadHandle, fmt::format("unknown queue {}", q)};
}

}  // namespace

Controller::Controller(Backend& backend, const ControllerOptions& options)
    : backend_(backend),
      options_(options),
      call_limits_{backend.page_size(), backend.config().vocab_size, backend.config().hybrid()},
      policy_(make_dispatch_policy(options.policy)),
      spaces_(backend.page_slots(), backend.embed_slots(), backend.state_slots(),
              ResourceOptions{backend.page_size(), options.max_kv_pages_per_instance,
                              options.max_states_per_instance, options.prefix_cache}),
      adapters_(backend, options.max_loras) {
  if (backend.config().hybrid() && backend.state_slots().capacity() == 0)
    fail("model '{}' has recurrent layers but the backend keeps no recurrent states",
         backend.config().name);
  limits_.max_tokens = options.max_batch_tokens;
  limits_.max_seqs = options.max_batch_seqs;
  limits_.formation = options.batch_formation;
  limits_.long_prefill_threshold = options.long_prefill_threshold ? options.long_prefill_threshold
                                                                  : options.max_batch_tokens / 4;
  limits_ = policy_->limit(limits_);
  // Recomputing a hybrid model's pages would replay tokens through a recurrent state that has
  // moved on: its suspended pages are always swapped.
  if (options.kv_pressure == KvPressure::Suspend && options.preemption == Preemption::Recompute &&
      !call_limits_.recurrent)
    provenance_ = std::make_unique<KvProvenance>(
        backend.page_slots().capacity(), backend.embed_slots().capacity(), backend.page_size());
  dispatcher_ = std::thread([this] { dispatcher_loop(); });
}

Controller::~Controller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  dispatcher_.join();
  // Fail whatever is still pending so no waiter hangs.
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    for (auto id : spaces_.instance_ids()) release_instance_locked(id, deferred);
  }
  for (auto& f : deferred) f();
}

// ---------------------------------------------------------------- instances

void Controller::register_instance(InstanceId id, KillFn on_kill) {
  std::lock_guard lock(mu_);
  spaces_.add_instance(id, std::move(on_kill));
}

void Controller::release_instance(InstanceId id) {
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    release_instance_locked(id, deferred);
  }
  for (auto& f : deferred) f();
}

void Controller::release_instance_locked(InstanceId id, Deferred& deferred) {
  for (QueueId qid : spaces_.queues_of(id)) {
    auto qit = queues_.find(qid);
    if (qit == queues_.end()) continue;
    drop_pending_locked(qit->second, "instance terminated", deferred);
    queues_.erase(qit);
  }
  if (auto r = restoring_.find(id); r != restoring_.end()) {
    if (auto qit = queues_.find(r->second.queue); qit != queues_.end()) {
      drop_pending_locked(qit->second, "instance terminated", deferred);
      queues_.erase(qit);
    }
    restoring_.erase(r);
  }
  dropped_.erase(id);
  forget_kv_client_locked(id);
  spaces_.release_instance(id);
  work_cv_.notify_one();  // pages came back: someone may be waiting for them
  // In-flight calls of this instance still hold their references; they are released when the
  // batch completes, and their completions see Status::Terminated there.
}

void Controller::release_refs_locked(const PendingCall& call) {
  if (spaces_.suspended(call.owner)) {
    for (uint32_t p : call.held_pages)  // its swapped pages hold no references while out
      if (!spaces_.is_swapped(call.owner, p)) spaces_.page_refs().release(p);
  } else {
    spaces_.page_refs().release(call.held_pages);
  }
  spaces_.embed_refs().release(call.held_embeds);
  if (spaces_.suspended(call.owner)) {
    for (uint32_t s : call.held_states)  // likewise its swapped states
      if (!spaces_.is_state_swapped(call.owner, s)) spaces_.state_refs().release(s);
  } else {
    spaces_.state_refs().release(call.held_states);
  }
}

void Controller::drop_pending_locked(Queue& queue, const char* why, Deferred& deferred) {
  // Pending calls give back their references and complete with Status::Terminated; waiters
  // on synchronize are released too (after the completions, outside the lock).
  for (auto& p : queue.calls) {
    release_refs_locked(*p);
    if (p->done)
      deferred.push_back([done = std::move(p->done), why]() mutable {
        done(Failure{Status::Terminated, why});
      });
  }
  for (auto& [_, fn] : queue.sync_waiters) deferred.push_back(std::move(fn));
  queue.calls.clear();
  queue.infos.clear();
  queue.sync_waiters.clear();
}

Controller::Queue* Controller::find_queue(InstanceId id, QueueId q) {
  auto it = queues_.find(q);
  if (it == queues_.end() || it->second.owner != id) return nullptr;
  return &it->second;
}

// ---------------------------------------------------------------- queues

Result<QueueId> Controller::create_queue(InstanceId id) {
  std::lock_guard lock(mu_);
  const QueueId q = next_queue_id_;
  if (auto added = spaces_.add_queue(id, q); !added) return added.failure();
  ++next_queue_id_;
  queues_[q].owner = id;
  return q;
}

Result<void> Controller::destroy_queue(InstanceId id, QueueId q) {
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    Queue* queue = find_queue(id, q);
    if (!queue) return unknown_queue(q);
    drop_pending_locked(*queue, "queue destroyed", deferred);
    queues_.erase(q);
    spaces_.remove_queue(id, q);
  }
  for (auto& f : deferred) f();
  return {};
}

Result<void> Controller::set_queue_priority(InstanceId id, QueueId q, int32_t priority) {
  std::lock_guard lock(mu_);
  Queue* queue = find_queue(id, q);
  if (!queue) return unknown_queue(q);
  queue->priority = priority;
  return {};
}

Result<void> Controller::synchronize(InstanceId id, QueueId q, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    Queue* queue = find_queue(id, q);
    if (!queue) return unknown_queue(q);
    if (queue->completed < queue->submitted) {
      queue->sync_waiters.emplace_back(queue->submitted, std::move(done));
      return {};
    }
  }
  done();
  return {};
}

// ---------------------------------------------------------------- resources

Result<void> Controller::alloc_pages(InstanceId id, uint32_t n, std::vector<uint32_t>& handles) {
  Deferred deferred;
  Result<void> result;
  {
    std::lock_guard lock(mu_);
    if (options_.kv_pressure == KvPressure::Suspend) return alloc_or_wait_locked(id, n, handles);
    result = spaces_.alloc_pages(
        id, n,
        [&](InstanceId victim, KillFn kill) {
          // Killed before its pending calls complete as cancelled (end_instance_locked says why).
          if (kill)
            deferred.push_back(
                [kill = std::move(kill)] { kill("KV memory needed by an older inferlet"); });
          release_instance_locked(victim, deferred);
        },
        handles);
  }
  for (auto& f : deferred) f();
  return result;
}

Result<std::vector<uint32_t>> Controller::alloc_pages(InstanceId id, uint32_t n) {
  std::vector<uint32_t> handles;
  if (auto r = alloc_pages(id, n, handles); !r) return r.failure();
  return handles;
}

Result<void> Controller::dealloc_pages(InstanceId id, std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (!alloc_waits_.empty()) work_cv_.notify_one();
  return spaces_.dealloc_pages(id, handles);
}

Result<void> Controller::alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles) {
  std::lock_guard lock(mu_);
  return spaces_.alloc_embeds(id, n, handles);
}

Result<std::vector<uint32_t>> Controller::alloc_embeds(InstanceId id, uint32_t n) {
  std::vector<uint32_t> handles;
  if (auto r = alloc_embeds(id, n, handles); !r) return r.failure();
  return handles;
}

Result<void> Controller::dealloc_embeds(InstanceId id, std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  return spaces_.dealloc_embeds(id, handles);
}

Result<void> Controller::export_pages(InstanceId id, const std::string& name,
                                      std::span<const uint32_t> handles, bool persistent) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  return spaces_.export_pages(id, name, handles, persistent);
}

Result<std::vector<uint32_t>> Controller::import_pages(InstanceId id, const std::string& name) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r.failure();
  return spaces_.import_pages(id, name);
}

Result<void> Controller::remove_export(const std::string& name) {
  std::lock_guard lock(mu_);
  return spaces_.remove_export(name);
}

std::vector<std::string> Controller::list_exports() const {
  std::lock_guard lock(mu_);
  return spaces_.list_exports();
}

Result<Controller::PrefixMatch> Controller::prefix_match(InstanceId id,
                                                         std::span<const int32_t> tokens,
                                                         uint32_t adapter) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r.failure();
  return spaces_.prefix_match(id, tokens, adapter);
}

Result<void> Controller::prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                                       std::span<const uint32_t> handles, uint32_t adapter,
                                       uint32_t state_handle) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  return spaces_.prefix_insert(id, tokens, handles, adapter, state_handle);
}

bool Controller::has_page(InstanceId id, uint32_t handle) const {
  std::lock_guard lock(mu_);
  return spaces_.has_page(id, handle);
}

uint32_t Controller::pages_held(InstanceId id) const {
  std::lock_guard lock(mu_);
  return spaces_.pages_held(id);
}

// ---------------------------------------------------------------- queued calls

Result<void> Controller::submit(InstanceId id, QueueId q, Result<BuiltCall> built,
                                CallCompletion done) {
  // Caller holds mu_ and has checked the instance and the queue.
  if (!built) return built.failure();
  Queue* queue = find_queue(id, q);
  auto call = std::make_shared<PendingCall>();
  call->call = std::move(built->call);
  call->held_pages = std::move(built->held_pages);
  call->held_embeds = std::move(built->held_embeds);
  call->held_states = std::move(built->held_states);
  call->owner = id;
  call->queue = q;
  call->done = std::move(done);
  CallInfo info = std::move(built->info);
  info.id = next_call_id_++;
  info.enqueued_ns = call->enqueued_ns = now_ns();
  if (auto it = kv_clients_.find(id); it != kv_clients_.end())
    it->second.last_active_ns = info.enqueued_ns;
  spaces_.page_refs().retain(call->held_pages);
  spaces_.embed_refs().retain(call->held_embeds);
  spaces_.state_refs().retain(call->held_states);
  queue->infos.push_back(std::move(info));
  queue->calls.push_back(std::move(call));
  ++queue->submitted;
  work_cv_.notify_one();
  return {};
}

Result<void> Controller::forward(InstanceId id, QueueId q, SequenceInput&& seq,
                                 CallCompletion&& done,
                                 std::shared_ptr<const AdapterLease> adapter) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (!find_queue(id, q)) return unknown_queue(q);
  seq.adapter = adapter ? adapter->id() : 0;
  auto built = build_forward(call_limits_, *spaces_.page_table(id), *spaces_.embed_table(id),
                             *spaces_.state_table(id), std::move(seq));
  if (built) std::get<ForwardCall>(built->call).adapter_lease = std::move(adapter);
  return submit(id, q, std::move(built), std::move(done));
}

Result<void> Controller::embed_tokens(InstanceId id, QueueId q, std::vector<int32_t> tokens,
                                      std::vector<uint32_t> positions,
                                      std::vector<uint32_t> embed_handles, CallCompletion done) {
  std::lock_guard lock(mu_);
  if (!spaces_.has_instance(id)) return unknown_instance();
  if (!find_queue(id, q)) return unknown_queue(q);
  return submit(id, q,
                build_embed_tokens(call_limits_, *spaces_.embed_table(id), std::move(tokens),
                                   std::move(positions), embed_handles),
                std::move(done));
}

Result<void> Controller::next_dist(InstanceId id, QueueId q, uint32_t embed_handle, uint32_t top_k,
                                   CallCompletion done) {
  std::lock_guard lock(mu_);
  if (!spaces_.has_instance(id)) return unknown_instance();
  if (!find_queue(id, q)) return unknown_queue(q);
  return submit(id, q, build_next_dist(call_limits_, *spaces_.embed_table(id), embed_handle, top_k),
                std::move(done));
}

Result<void> Controller::copy_kv(InstanceId id, QueueId q, uint32_t src_handle, uint32_t dst_handle,
                                 uint32_t src_offset, uint32_t dst_offset, uint32_t n,
                                 CallCompletion done) {
  std::lock_guard lock(mu_);
  if (auto r = resident_or_wait_locked(id); !r) return r;
  if (!find_queue(id, q)) return unknown_queue(q);
  return submit(id, q,
                build_copy_kv(call_limits_, *spaces_.page_table(id), src_handle, dst_handle,
                              src_offset, dst_offset, n),
                std::move(done));
}

// ---------------------------------------------------------------- dispatch

void Controller::set_batch_observer(std::function<void(const BatchStats&)> fn) {
  std::lock_guard lock(mu_);
  batch_observer_ = std::move(fn);
}

ControllerGauges Controller::gauges() const {
  std::lock_guard lock(mu_);
  ControllerGauges g = counters_;
  g.pages_total = backend_.page_slots().capacity();
  g.pages_free = spaces_.pages_free();
  g.embeds_total = backend_.embed_slots().capacity();
  g.embeds_free = spaces_.embeds_free();
  g.states_total = backend_.state_slots().capacity();
  g.states_free = spaces_.states_free();
  g.states_waiting = 0;
  for (const auto& [_, w] : state_waits_) g.states_waiting += w.ready || w.refused ? 0 : 1;
  g.instances = static_cast<uint32_t>(spaces_.n_instances());
  g.instances_killed_for_memory = spaces_.instances_killed_for_memory();
  uint32_t depth = 0;
  for (const auto& [_, q] : queues_) depth += static_cast<uint32_t>(q.infos.size());
  g.queue_depth = depth;
  g.kv_waiting = 0;
  for (const auto& [_, w] : alloc_waits_) g.kv_waiting += w.granted || w.refused ? 0 : 1;
  g.instances_suspended = static_cast<uint32_t>(spaces_.suspended_instances().size());
  g.instances_restoring = static_cast<uint32_t>(restoring_.size());
  g.swap_bytes = spaces_.swap_bytes();
  if (const PrefixCache* cache = spaces_.prefix_cache()) {
    g.pages_cached = cache->stats().cached_pages;
    g.prefix_hit_tokens = cache->stats().hit_tokens;
    g.prefix_miss_tokens = cache->stats().miss_tokens;
    g.states_cached = cache->stats().cached_states;
  }
  return g;
}

BatchLimits Controller::batch_limits_locked() const {
  BatchLimits limits = limits_;
  if (options_.itl_target_ns > 0 && forward_token_ns_ > 0) {
    // The tokens a batch can hold within the target; the prefill beside the decodes gets what
    // their own tokens leave, never less than one page of prompt.
    const double tokens = double(options_.itl_target_ns) / forward_token_ns_;
    limits.tokens_with_decodes = static_cast<uint32_t>(
        std::clamp(tokens, 1.0, double(std::numeric_limits<uint32_t>::max())));
    limits.min_prefill_with_decodes = page_size();
  }
  return limits;
}

void Controller::dispatcher_loop() {
  std::vector<QueueView> views;
  std::unique_lock lock(mu_);
  while (wait_for_work(lock, views)) {
    Batch batch = take_locked(form_batch(views, batch_limits_locked()));
    lock.unlock();
    const int64_t t0 = now_ns();
    if (!batch.clear.empty()) clear_states(batch);
    execute_batch(backend_, batch.calls);
    const int64_t backend_ns = now_ns() - t0;
    lock.lock();
    Deferred waiters = complete_locked(batch, backend_ns);
    auto observer = batch_observer_;
    lock.unlock();

    // Statistics, then completions (they carry results), then the synchronize waiters that
    // follow them.
    const BatchPlan& plan = batch.plan;
    if (observer)
      observer({plan.type, plan.n_calls, plan.n_tokens, plan.n_seqs, batch.prefill_tokens,
                batch.decode_tokens, batch.max_wait_ns, backend_ns});
    for (auto& c : batch.calls)
      if (c->done && !c->parent) c->done(std::move(c->outcome));
    for (auto& f : waiters) f();
    lock.lock();
  }
}

void Controller::clear_states(Batch& batch) {
  try {
    backend_.clear_states(batch.clear);
  } catch (const std::exception& e) {
    spdlog::error("emptying {} new recurrent states failed: {}", batch.clear.size(), e.what());
    for (auto& c : batch.calls)
      for (uint32_t s : c->held_states)
        if (std::binary_search(batch.clear.begin(), batch.clear.end(), s))
          c->outcome = Failure{Status::BackendFailure,
                               fmt::format("emptying a new recurrent state failed: {}", e.what())};
  }
}

bool Controller::wait_for_work(std::unique_lock<std::mutex>& lock, std::vector<QueueView>& views) {
  // No busy-waiting: an idle server sleeps here until a call arrives or the policy's recheck.
  for (;;) {
    if (stop_) return false;
    // KV pressure first: grants, suspensions and resumes change which queues may run.
    Deferred wakes;
    const bool blocked = relieve_pressure_locked(wakes);
    if (!wakes.empty()) {
      lock.unlock();
      for (auto& f : wakes) f();
      lock.lock();
      continue;
    }
    views.clear();
    int64_t oldest = INT64_MAX;
    for (auto& [qid, q] : queues_) {
      // A resumed instance's own queues wait for its restore queue (its recomputed pages).
      if (q.infos.empty() || spaces_.suspended(q.owner) || (!q.restore && restoring(q.owner)))
        continue;
      views.push_back({qid, q.priority, q.infos});
      oldest = std::min(oldest, q.infos.front().enqueued_ns);
    }
    if (views.empty()) {
      // A blocked allocation is looked at again now and then: an instance may have gone idle.
      if (blocked)
        work_cv_.wait_for(lock, std::chrono::milliseconds(50));
      else
        work_cv_.wait(lock);
      continue;
    }
    DispatchState ds;
    ds.n_eligible = views.size();
    const int64_t now = now_ns();
    ds.oldest_wait_ns = now - oldest;
    ds.since_last_batch_ns = now - last_batch_end_ns_;
    ds.last_backend_ns = last_backend_ns_;
    for (QueueId q : last_batch_queues_) {
      auto it = queues_.find(q);
      if (it != queues_.end() && it->second.infos.empty()) ++ds.returning;
    }
    DispatchDecision d = policy_->decide(ds);
    if (d.dispatch) return true;
    work_cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(d.recheck_after_ns, 1000)));
  }
}

Controller::Batch Controller::take_locked(BatchPlan plan) {
  Batch batch;
  batch.calls.reserve(plan.n_calls);
  const int64_t dispatch_ns = now_ns();
  for (const QueueTake& take : plan.takes) {
    Queue& q = queues_.at(take.queue_id);
    for (uint32_t i = 0; i < take.calls; ++i) {
      batch.max_wait_ns = std::max(batch.max_wait_ns, dispatch_ns - q.infos[i].enqueued_ns);
      batch.calls.push_back(std::move(q.calls.front()));
      q.calls.pop_front();
    }
    q.infos.erase(q.infos.begin(), q.infos.begin() + take.calls);
    if (take.partial_tokens > 0) {
      batch.max_wait_ns = std::max(batch.max_wait_ns, dispatch_ns - q.infos.front().enqueued_ns);
      batch.calls.push_back(split_chunk_locked(q, take.partial_tokens));
    }
  }
  if (plan.type == CallType::Forward)
    for (const auto& c : batch.calls) {
      const size_t n = c->forward().seq.n_inputs();
      const bool decode = n == 1 && !c->parent && !c->chunked;
      (decode ? batch.decode_tokens : batch.prefill_tokens) += static_cast<uint32_t>(n);
    }
  batch.plan = std::move(plan);
  if (provenance_) record_batch_locked(batch);
  // New states still allocated (a state freed meanwhile may go back to the pool uncleared).
  for (uint32_t s : states_to_clear_)
    if (spaces_.state_refs().count(s) > 0) batch.clear.push_back(s);
  states_to_clear_.clear();
  std::sort(batch.clear.begin(), batch.clear.end());
  batch.clear.erase(std::unique(batch.clear.begin(), batch.clear.end()), batch.clear.end());
  return batch;
}

std::shared_ptr<PendingCall> Controller::split_chunk_locked(Queue& queue, uint32_t m) {
  const std::shared_ptr<PendingCall>& rest = queue.calls.front();
  SequenceInput& seq = rest->forward().seq;
  if (!rest->chunked) {
    rest->chunked = true;
    rest->gathered.resize(seq.outputs.size());
  }
  PrefillChunk piece = split_prefill(seq, rest->output_origin, m, page_size());
  narrow_after_split(queue.infos.front(), seq, m, page_size());

  auto chunk = std::make_shared<PendingCall>();
  chunk->owner = rest->owner;
  chunk->queue = rest->queue;
  chunk->enqueued_ns = rest->enqueued_ns;
  chunk->parent = rest;
  chunk->output_origin = std::move(piece.origin);
  // The chunk holds its own references (the rest may be released while it runs).
  chunk->held_pages = piece.seq.kv_pages;
  chunk->held_embeds = piece.seq.embed_slots;
  if (piece.seq.state_slot != SequenceInput::kNoState)
    chunk->held_states.push_back(piece.seq.state_slot);
  for (const auto& o : piece.seq.outputs)
    if (o.kind == OutputKind::Embed) chunk->held_embeds.push_back(o.embed_slot);
  spaces_.page_refs().retain(chunk->held_pages);
  spaces_.embed_refs().retain(chunk->held_embeds);
  spaces_.state_refs().retain(chunk->held_states);
  chunk->call = ForwardCall{std::move(piece.seq), nullptr};  // the parent holds the adapter
  return chunk;
}

Controller::Deferred Controller::complete_locked(Batch& batch, int64_t backend_ns) {
  // Release references, hand chunk outputs to their call, advance queue counters and collect
  // the synchronize waiters this batch satisfies.
  Deferred waiters;
  for (auto& c : batch.calls) {
    release_refs_locked(*c);
    if (c->parent) {
      PendingCall& parent = *c->parent;
      if (c->outcome.ok())
        gather_outputs(parent.gathered, c->output_origin, c->outcome->forward.outputs);
      else if (parent.outcome.ok())
        parent.outcome = std::move(c->outcome);  // the whole call fails with its chunk
      continue;
    }
    if (c->chunked && c->outcome.ok()) {
      auto& outs = c->outcome->forward.outputs;
      gather_outputs(c->gathered, c->output_origin, outs);
      outs = std::move(c->gathered);
    }
    auto qit = queues_.find(c->queue);
    if (qit == queues_.end()) {
      c->outcome = Failure{Status::Terminated, "instance terminated while the call ran"};
      continue;
    }
    Queue& q = qit->second;
    ++q.completed;
    auto& sync = q.sync_waiters;
    for (auto it = sync.begin(); it != sync.end();) {
      if (it->first <= q.completed) {
        waiters.push_back(std::move(it->second));
        it = sync.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (provenance_) record_outcome_locked(batch, waiters);
  const BatchPlan& plan = batch.plan;
  last_batch_queues_.clear();
  for (const QueueTake& t : plan.takes) last_batch_queues_.push_back(t.queue_id);
  last_batch_end_ns_ = now_ns();
  last_backend_ns_ = backend_ns;
  // Time per token, learnt from forward batches big enough for per-call overhead not to
  // dominate (the ITL target's prefill allowance).
  if (plan.type == CallType::Forward && plan.n_tokens >= 8) {
    const double per_token = double(backend_ns) / plan.n_tokens;
    forward_token_ns_ =
        forward_token_ns_ == 0 ? per_token : 0.8 * forward_token_ns_ + 0.2 * per_token;
  }
  ++counters_.batches;
  counters_.calls += plan.n_calls;
  counters_.tokens += plan.n_tokens;
  counters_.prefill_tokens += batch.prefill_tokens;
  counters_.decode_tokens += batch.decode_tokens;
  return waiters;
}

}  // namespace pith
