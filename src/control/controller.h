// The control layer's central controller (paper §5.2, Figure 3): it owns the virtual
// resource spaces of every inferlet instance, their command queues, and the dispatcher thread
// that turns pending backend calls into batches.
//
// Threading: any thread (the runtime's) may call the public methods; they take one mutex for
// a few hundred nanoseconds and never wait for the backend. Backend-bound calls (forward,
// embed_tokens, next_dist, copy_kv) are queued and complete later through their CallCompletion,
// which runs on the dispatcher thread: keep it short (the runtime posts to the fiber that
// waits). Resource calls (alloc, dealloc, export, import) complete immediately.
//
// Handles: every page/embed/queue an instance names is a handle in its own space
// (resource_spaces.h), translated to physical ids when the call is built (call_builder.h); the
// backend only ever sees physical ids. A queued call holds references on the physical pages and
// Embeds it uses until it completes.
//
// This file owns the queues and the dispatcher loop; the jobs it delegates: resource_spaces.h
// (handles, references, exports, quotas, contention), call_builder.h (validation),
// batch_scheduler.h (which calls form the next batch), chunked_prefill.h (splitting a forward
// and merging its outputs), batch_execution.h (running a batch, mapping backend failures).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "control/adapter_registry.h"
#include "control/batch_scheduler.h"
#include "control/call_builder.h"
#include "control/calls.h"
#include "control/contention_policy.h"
#include "control/dispatch_policy.h"
#include "control/kv_provenance.h"
#include "control/pending_call.h"
#include "control/resource_spaces.h"
#include "control/status.h"

namespace pith {

// What happens when KV pages run short (contention_policy.h).
enum class KvPressure : uint8_t {
  Suspend,  // allocations wait; lower-ranked or idle instances are swapped to host memory
  Kill,     // the paper's baseline: the newest instance is terminated
};

// How a suspended instance's pages come back (the suspend policy).
enum class Preemption : uint8_t {
  Swap,       // every private page is saved to host memory and loaded on resume
  Recompute,  // pages with a recipe (kv_provenance.h) are dropped and recomputed from their
              // tokens on resume; the others are swapped
};

struct ControllerOptions {
  std::string policy = "adaptive";  // adaptive | eager | k[:K] | t[:MS]
  uint32_t max_batch_tokens = 512;  // token budget per batch; 0: unlimited, no chunking
  uint32_t max_batch_seqs = 256;
  BatchFormation batch_formation = BatchFormation::DecodeFirst;
  // Prefills longer than this wait behind shorter ones (decode-first formation); 0 = a
  // quarter of the token budget.
  uint32_t long_prefill_threshold = 0;
  uint32_t max_kv_pages_per_instance = 0;        // 0: no quota
  uint32_t max_states_per_instance = 0;          // recurrent states (hybrid models); 0: no quota
  bool prefix_cache = true;                      // --no-prefix-cache turns it off
  KvPressure kv_pressure = KvPressure::Suspend;  // --kv-pressure
  Preemption preemption = Preemption::Swap;      // --preemption-mode
  size_t swap_bytes =
      size_t{4} << 30;  // host memory for suspended instances' pages and states (--swap-memory)
  // An instance with nothing queued for this long may be suspended by any instance that needs
  // pages, whatever their ranks (an agent waiting for its user); 0: never.
  int64_t idle_suspend_ns = 1'000'000'000;
  uint32_t max_loras = 64;  // LoRA adapters loaded at once (--max-loras)
  // Inter-token latency target (--itl-target-ms): a batch with decode steps takes only as many
  // prefill tokens as the backend's measured time per token allows in this time. 0: off.
  int64_t itl_target_ns = 0;
};

// Per-batch accounting, reported to an observer (metrics, the periodic log line).
struct BatchStats {
  CallType type;
  uint32_t calls = 0, tokens = 0, seqs = 0;
  // Forward input tokens split by kind: a sequence with one input is a decode step, more
  // (or any chunk of a chunked prefill) is prefill.
  uint32_t prefill_tokens = 0, decode_tokens = 0;
  int64_t max_wait_ns = 0;  // oldest call's wait from submission to dispatch
  int64_t backend_ns = 0;   // time in the backend
};

struct ControllerGauges {
  uint32_t pages_total = 0, pages_free = 0;
  uint32_t embeds_total = 0, embeds_free = 0;
  // Recurrent states of hybrid models (0 for others); cached: prefix-cache checkpoints.
  uint32_t states_total = 0, states_free = 0, states_cached = 0;
  uint32_t states_waiting = 0;  // instances whose state allocation waits
  uint64_t state_wait_ns = 0;   // time state allocations spent waiting, summed
  uint32_t instances = 0;
  uint32_t queue_depth = 0;  // pending calls over all queues
  uint64_t batches = 0, calls = 0, tokens = 0;
  uint64_t prefill_tokens = 0, decode_tokens = 0;  // forward inputs (see BatchStats)
  uint64_t instances_killed_for_memory = 0;
  uint32_t pages_cached = 0;  // owned by the prefix cache
  uint64_t prefix_hit_tokens = 0, prefix_miss_tokens = 0;
  // KV pressure (suspend policy).
  uint32_t kv_waiting = 0;           // instances whose allocation waits (the admission queue)
  uint32_t instances_suspended = 0;  // instances whose pages are in host memory now
  uint32_t instances_restoring = 0;  // resumed instances whose dropped pages are recomputing
  uint64_t suspensions = 0, resumes = 0;
  uint64_t pages_swapped_out = 0, pages_swapped_in = 0;
  uint64_t states_swapped_out = 0, states_swapped_in = 0;  // recurrent states (hybrid models)
  uint64_t swap_bytes = 0;  // host memory held by suspended instances' pages and states now
  int64_t swap_ns = 0;      // time spent saving and loading pages and states
  // Recompute preemption: pages dropped instead of saved, the tokens that rebuilt them, and the
  // time from each resume to the end of its recompute.
  uint64_t pages_dropped = 0, tokens_recomputed = 0;
  int64_t recompute_ns = 0;
  uint64_t kv_wait_ns = 0;  // time allocations spent waiting, summed
  uint64_t kv_refused = 0;  // allocations refused: more than the pool can give the instance
};

class Controller {
 public:
  // The backend must outlive the controller; it is called only from the dispatcher thread.
  Controller(Backend& backend, const ControllerOptions& options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const ModelConfig& model_config() const { return backend_.config(); }
  // The loaded LoRA adapters (control/adapter_registry.h); a forward names one by its id.
  AdapterRegistry& adapters() { return adapters_; }
  uint32_t page_size() const { return backend_.page_size(); }

  // Every call below that can fail returns a Result whose Failure names the reason
  // (status.h); an unknown instance is Status::Terminated.

  // ---- instances ----
  // Instances launched later are "newer" (contention_policy.h ranks them after older ones).
  void register_instance(InstanceId id, KillFn on_kill);
  // Releases every handle, queue and pending call of the instance (pending calls complete
  // with Status::Terminated). Idempotent.
  void release_instance(InstanceId id);

  // ---- queues ----
  Result<QueueId> create_queue(InstanceId id);
  // Removes the queue; its pending calls complete with Status::Terminated.
  Result<void> destroy_queue(InstanceId id, QueueId q);
  Result<void> set_queue_priority(InstanceId id, QueueId q, int32_t priority);
  // `done` runs once every call submitted to q before this one has completed.
  Result<void> synchronize(InstanceId id, QueueId q, std::function<void()> done);

  // ---- KV pressure (the suspend policy; contention_policy.h, kv_suspension.cpp) ----
  // Lets the instance wait. When pages are short its allocation answers Status::Waiting, and
  // while it is suspended so do its calls that touch pages; `wake` (any thread, called outside
  // the lock) says when to call again. Instances without a waker never wait and are never
  // suspended: their allocations fail at once, as under fail_fast.
  void set_waker(InstanceId id, std::function<void()> wake);
  // The inferlet's opt-out of waiting: allocations that do not fit fail at once (OutOfKvPages).
  void set_fail_fast(InstanceId id, bool fail_fast);

  // ---- resources (complete immediately, or answer Status::Waiting, see above) ----
  // The out-parameter forms fill `handles` keeping its capacity (the guest's per-step path);
  // the value forms are for callers that allocate rarely.
  Result<void> alloc_pages(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<std::vector<uint32_t>> alloc_pages(InstanceId id, uint32_t n);
  Result<void> dealloc_pages(InstanceId id, std::span<const uint32_t> handles);
  Result<void> alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<std::vector<uint32_t>> alloc_embeds(InstanceId id, uint32_t n);
  Result<void> dealloc_embeds(InstanceId id, std::span<const uint32_t> handles);
  // Exports share pages by name; the export holds its own references, so a persistent
  // export outlives the exporter until remove_export. A non-persistent export is removed
  // when the exporter is released.
  Result<void> export_pages(InstanceId id, const std::string& name,
                            std::span<const uint32_t> handles, bool persistent);
  Result<std::vector<uint32_t>> import_pages(InstanceId id, const std::string& name);
  Result<void> remove_export(const std::string& name);
  std::vector<std::string> list_exports() const;
  // Radix prefix cache (system service). prefix_match imports the longest cached prefix of
  // `tokens` (whole pages) read-only into the instance, with its token count; prefix_insert
  // offers the instance's computed pages for tokens[0 : n_pages * page_size]. With the cache
  // disabled, match finds nothing and insert does nothing. Hybrid models: a match ends on a
  // state checkpoint and imports it too (PrefixMatch::state); an insert names the state after
  // exactly its pages' tokens.
  using PrefixMatch = ResourceSpaces::PrefixMatch;
  Result<PrefixMatch> prefix_match(InstanceId id, std::span<const int32_t> tokens,
                                   uint32_t adapter = 0);
  Result<void> prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                             std::span<const uint32_t> handles, uint32_t adapter = 0,
                             uint32_t state_handle = 0);

  // ---- recurrent states (hybrid models): one per sequence, named by handle like pages
  // (resource_spaces.h). A new state starts empty (the sequence before its first token); a
  // forward names its state in SequenceInput::state_slot (a handle) and advances it over the
  // inputs. copy_state queues a fork (dst continues exactly as src would), after the calls
  // queued before it on q. A suspended instance's states go to host memory with its pages. An
  // allocation the pool cannot satisfy (after evicting unused prefix-cache checkpoints) waits
  // like a KV allocation (Status::Waiting, then the waker) while others could give states back;
  // otherwise, or for an instance that fails fast, it fails (OutOfStates)
  // (controller_states.cpp).
  Result<void> alloc_states(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<void> dealloc_states(InstanceId id, std::span<const uint32_t> handles);
  Result<void> copy_state(InstanceId id, QueueId q, uint32_t src_handle, uint32_t dst_handle,
                          CallCompletion done);
  Result<void> export_state(InstanceId id, const std::string& name, uint32_t handle,
                            bool persistent);
  Result<uint32_t> import_state(InstanceId id, const std::string& name);
  Result<void> remove_state_export(const std::string& name);
  bool recurrent() const { return call_limits_.recurrent; }
  size_t state_bytes() const { return backend_.state_bytes(); }

  bool has_page(InstanceId id, uint32_t handle) const;
  // Pages this instance can see through handles (for listings and quotas).
  uint32_t pages_held(InstanceId id) const;

  // ---- queued backend calls ----
  // Validated fully here (call_builder.h): a bad request fails alone with BadHandle /
  // BadArgument and a message, and never reaches a batch. `done` runs on the dispatcher thread
  // with the call's output or its Failure.
  // Status::Waiting (a suspended instance) leaves `seq` and `done` untouched for the next try.
  Result<void> forward(InstanceId id, QueueId q, SequenceInput&& seq, CallCompletion&& done,
                       std::shared_ptr<const AdapterLease> adapter = nullptr);
  Result<void> embed_tokens(InstanceId id, QueueId q, std::vector<int32_t> tokens,
                            std::vector<uint32_t> positions, std::vector<uint32_t> embed_handles,
                            CallCompletion done);
  Result<void> next_dist(InstanceId id, QueueId q, uint32_t embed_handle, uint32_t top_k,
                         CallCompletion done);
  Result<void> copy_kv(InstanceId id, QueueId q, uint32_t src_handle, uint32_t dst_handle,
                       uint32_t src_offset, uint32_t dst_offset, uint32_t n, CallCompletion done);

  ControllerGauges gauges() const;
  // Observer for per-batch statistics (called on the dispatcher thread).
  void set_batch_observer(std::function<void(const BatchStats&)> fn);

 private:
  using Deferred = std::vector<std::function<void()>>;  // run after the lock is released
  struct Queue {
    InstanceId owner = 0;
    int32_t priority = 0;
    bool restore = false;  // the controller's queue that recomputes a resumed instance's pages
    std::vector<CallInfo> infos;                     // pending, oldest first (scheduler view)
    std::deque<std::shared_ptr<PendingCall>> calls;  // parallel to infos
    uint64_t submitted = 0, completed = 0;
    std::vector<std::pair<uint64_t, std::function<void()>>> sync_waiters;
  };
  // One dispatched batch, between take and complete.
  struct Batch {
    BatchPlan plan;
    std::vector<std::shared_ptr<PendingCall>> calls;
    int64_t max_wait_ns = 0;
    uint32_t prefill_tokens = 0, decode_tokens = 0;
    std::vector<uint32_t> written;  // pages it writes (recompute preemption: opaque if it fails)
    std::vector<uint32_t> clear;    // new recurrent states to empty before it runs
  };

  static int64_t now_ns();
  Queue* find_queue(InstanceId id, QueueId q);
  Result<void> submit(InstanceId id, QueueId q, Result<BuiltCall> built, CallCompletion done);
  void release_instance_locked(InstanceId id, Deferred& deferred);
  void drop_pending_locked(Queue& queue, const char* why, Deferred& deferred);
  void release_refs_locked(const PendingCall& call);

  // The dispatcher: wait for work the policy wants dispatched, plan a batch, take its calls
  // from the queues, execute them on the backend (unlocked), complete them.
  void dispatcher_loop();
  // Empties the batch's new states (dispatcher thread, unlocked); if the backend fails, the
  // batch's calls on them fail instead of running on garbage.
  void clear_states(Batch& batch);
  BatchLimits batch_limits_locked() const;  // limits_ with the ITL target's prefill allowance
  bool wait_for_work(std::unique_lock<std::mutex>& lock, std::vector<QueueView>& views);
  Batch take_locked(BatchPlan plan);
  std::shared_ptr<PendingCall> split_chunk_locked(Queue& queue, uint32_t m);
  Deferred complete_locked(Batch& batch, int64_t backend_ns);

  // KV pressure (kv_suspension.cpp).
  struct AllocWait {
    uint32_t n = 0;
    bool granted = false;  // the pages are reserved for it; it takes them when it calls again
    int64_t since_ns = 0;
    std::optional<Failure> refused;
  };
  struct KvClient {
    std::function<void()> wake;
    bool fail_fast = false;
    int64_t last_active_ns = 0;
  };
  Result<void> alloc_or_wait_locked(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<void> resident_or_wait_locked(InstanceId id);
  uint32_t pages_available_locked() const;  // free and not reserved for a granted wait
  KvRank rank_locked(InstanceId id) const;
  // Whether an instance that outranks `id` waits for pages or states, or is suspended.
  bool wanting_ahead_locked(InstanceId id) const;
  // Whether its page or state allocation waits (not yet granted, promised or refused).
  bool waiting_locked(InstanceId id) const;
  int64_t idle_ns_locked(InstanceId id, int64_t now) const;
  void forget_kv_client_locked(InstanceId id);
  void wake_locked(InstanceId id, Deferred& wakes);
  // Between batches, for pages and states alike: grants, promises, resumes and suspends in rank
  // order; true while someone still waits for what it could not get.
  bool relieve_pressure_locked(Deferred& deferred);
  // Whether any other instance, suspended or not, holds a state or a promise of one.
  bool others_hold_states_locked(InstanceId id) const;
  // States promised to woken waiters that have not taken them yet, and what is free beyond them.
  uint32_t states_promised_locked() const;
  uint32_t states_available_locked() const;
  // Makes `need` pages (or recurrent states) available to `requester`: evicts prefix-cache
  // entries, then suspends instances it outranks or that sit idle, if that is enough.
  enum class Pool { Pages, States };
  void make_room_locked(InstanceId requester, Pool pool, size_t need, int64_t now);
  // Whether an instance other than `id` that runs (neither waits nor is suspended) holds pages
  // (states) of `pool`, or a waiter woken with a grant (promise) has yet to take them: someone
  // that will give some back.
  bool running_others_hold_locked(InstanceId id, Pool pool) const;
  // The pages only this instance references (with its references on each), and when asked every
  // page it references (its handles and its queued calls').
  void private_pages_locked(InstanceId id, std::vector<uint32_t>& pages,
                            std::vector<uint32_t>& refs,
                            std::vector<uint32_t>* visible = nullptr) const;
  // The same for its recurrent states.
  void private_states_locked(InstanceId id, std::vector<uint32_t>& states,
                             std::vector<uint32_t>& refs) const;
  // The references (pages or states: `held`) its queued calls hold.
  std::vector<uint32_t> queued_refs_locked(InstanceId id,
                                           std::vector<uint32_t> PendingCall::*held) const;
  void suspend_locked(InstanceId victim);
  bool resume_locked(InstanceId id, Deferred& deferred);
  void end_instance_locked(InstanceId id, const std::string& why, Deferred& deferred);
  // Recompute preemption: what a batch writes, recorded before it runs; the queue that rebuilds
  // a resumed instance's dropped pages; after a batch, failed writes made opaque and finished
  // restores woken (or, failed, their instance ended).
  void record_batch_locked(Batch& batch);
  void start_restore_locked(InstanceId id, ReplayPlan plan);
  void record_outcome_locked(const Batch& batch, Deferred& deferred);
  bool restoring(InstanceId id) const { return !restoring_.empty() && restoring_.count(id); }

  Backend& backend_;
  ControllerOptions options_;
  CallLimits call_limits_;
  std::unique_ptr<DispatchPolicy> policy_;
  BatchLimits limits_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  ResourceSpaces spaces_;
  AdapterRegistry adapters_;
  double forward_token_ns_ = 0;      // EWMA of backend time per forward token (itl_target_ns)
  std::map<QueueId, Queue> queues_;  // ordered: stable scheduler input
  QueueId next_queue_id_ = 1;
  uint64_t next_call_id_ = 1;
  ControllerGauges counters_;
  std::function<void(const BatchStats&)> batch_observer_;

  // The last batch, for the adaptive policy's wait for returning callers.
  std::vector<QueueId> last_batch_queues_;
  int64_t last_batch_end_ns_ = 0;
  int64_t last_backend_ns_ = 0;

  std::vector<uint32_t> states_to_clear_;  // allocated since the last batch was taken
  // State allocations waiting for the pool (controller_states.cpp): woken when enough are free
  // (ready: promised, withdrawn if it is suspended first), or refused when no one else could
  // ever give one back.
  struct StateWait {
    uint32_t n = 0;
    int64_t since_ns = 0;
    bool ready = false;
    std::optional<Failure> refused;
  };
  std::map<InstanceId, StateWait> state_waits_;

  std::map<InstanceId, AllocWait> alloc_waits_;
  std::unordered_map<InstanceId, KvClient> kv_clients_;
  uint32_t reserved_pages_ = 0;
  // Recompute preemption: page recipes (null under swap), the dropped pages of suspended
  // instances, and the resumed ones whose restore queue is still running.
  std::unique_ptr<KvProvenance> provenance_;
  std::unordered_map<InstanceId, std::vector<DetachedPage>> dropped_;
  struct Restore {
    QueueId queue = 0;
    int64_t since_ns = 0;
  };
  std::unordered_map<InstanceId, Restore> restoring_;

  bool stop_ = false;
  std::thread dispatcher_;
};

}  // namespace pith
