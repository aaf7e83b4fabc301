// The control layer's central controller (paper §5.2, Figure 3): it owns the virtual
// resource spaces of every inferlet instance, their command queues, and the dispatcher thread
// that turns pending backend calls into batches.
//
// Threading: any thread (the runtime's) may call the public methods; they take one mutex for
// a few hundred nanoseconds and never wait for the backend. Backend-bound calls (forward,
// embed_tokens, next_dist, copy_kv) are queued and complete later through their Completion,
// which runs on the dispatcher thread: keep it short (the runtime posts to the fiber that
// waits). Resource calls (alloc, dealloc, export, import) complete immediately.
//
// Handles: every page/embed/queue an instance names is a handle in its own space
// (HandleTable), translated to physical ids here; the backend only ever sees physical ids.
// A queued call holds references on the physical pages and Embeds it uses until it completes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/batch_scheduler.h"
#include "control/dispatch_policy.h"
#include "control/handle_table.h"
#include "control/prefix_cache.h"
#include "control/ref_counts.h"
#include "control/status.h"
#include "engine/backend.h"

namespace pith {

using InstanceId = uint64_t;
using QueueId = uint64_t;

struct ControllerOptions {
  std::string policy = "adaptive";      // adaptive | eager | k[:K] | t[:MS]
  uint32_t max_batch_tokens = 512;       // token budget per batch; 0: unlimited, no chunking
  uint32_t max_batch_seqs = 256;
  BatchFormation batch_formation = BatchFormation::DecodeFirst;
  // Prefills longer than this wait behind shorter ones (decode-first formation); 0 = a
  // quarter of the token budget.
  uint32_t long_prefill_threshold = 0;
  uint32_t max_kv_pages_per_instance = 0;  // 0: no quota
  bool prefix_cache = true;                // --no-prefix-cache turns it off
};

// The result of a queued call, delivered to its Completion.
struct CallOutcome {
  Status status = Status::Ok;
  std::string error;              // human-readable detail when status != Ok
  SequenceResult forward;         // Forward
  TokenDistribution dist;         // NextDist
};
using Completion = std::function<void(CallOutcome&&)>;

// Called (outside the controller's lock) when the contention policy terminates an instance.
using KillFn = std::function<void(const std::string& reason)>;

// Per-batch accounting, reported to an observer (metrics, the periodic log line).
struct BatchStats {
  CallType type;
  uint32_t calls = 0, tokens = 0, seqs = 0;
  // Forward input tokens split by kind: a sequence with one input is a decode step, more
  // (or any chunk of a chunked prefill) is prefill.
  uint32_t prefill_tokens = 0, decode_tokens = 0;
  int64_t max_wait_ns = 0;     // oldest call's wait from submission to dispatch
  int64_t backend_ns = 0;      // time in the backend
};

struct ControllerGauges {
  uint32_t pages_total = 0, pages_free = 0;
  uint32_t embeds_total = 0, embeds_free = 0;
  uint32_t instances = 0;
  uint32_t queue_depth = 0;    // pending calls over all queues
  uint64_t batches = 0, calls = 0, tokens = 0;
  uint64_t prefill_tokens = 0, decode_tokens = 0;  // forward inputs (see BatchStats)
  uint64_t instances_killed_for_memory = 0;
  uint32_t pages_cached = 0;               // owned by the prefix cache
  uint64_t prefix_hit_tokens = 0, prefix_miss_tokens = 0;
};

class Controller {
 public:
  // The backend must outlive the controller; it is called only from the dispatcher thread.
  Controller(Backend& backend, const ControllerOptions& options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const ModelConfig& model_config() const { return backend_.config(); }
  uint32_t page_size() const { return backend_.page_size(); }

  // ---- instances ----
  // Instances launched later are "newer": the contention policy terminates the newest first.
  void register_instance(InstanceId id, KillFn on_kill);
  // Releases every handle, queue and pending call of the instance (pending calls complete
  // with Status::Terminated). Idempotent.
  void release_instance(InstanceId id);

  // ---- queues ----
  Status create_queue(InstanceId id, QueueId& out);
  // Removes the queue; its pending calls complete with Status::Terminated.
  Status destroy_queue(InstanceId id, QueueId q);
  Status set_queue_priority(InstanceId id, QueueId q, int32_t priority);
  // `done` runs once every call submitted to q before this one has completed.
  Status synchronize(InstanceId id, QueueId q, std::function<void()> done);

  // ---- resources (complete immediately) ----
  Status alloc_pages(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Status dealloc_pages(InstanceId id, std::span<const uint32_t> handles);
  Status alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Status dealloc_embeds(InstanceId id, std::span<const uint32_t> handles);
  // Exports share pages by name; the export holds its own references, so a persistent
  // export outlives the exporter until remove_export. A non-persistent export is removed
  // when the exporter is released.
  Status export_pages(InstanceId id, const std::string& name, std::span<const uint32_t> handles,
                      bool persistent);
  Status import_pages(InstanceId id, const std::string& name, std::vector<uint32_t>& handles);
  Status remove_export(const std::string& name);
  std::vector<std::string> list_exports() const;
  // Radix prefix cache (system service). prefix_match imports the longest cached prefix of
  // `tokens` (whole pages) read-only into the instance and sets `matched` to its token count;
  // prefix_insert offers the instance's computed pages for tokens[0 : n_pages * page_size].
  // With the cache disabled, match finds nothing and insert does nothing.
  Status prefix_match(InstanceId id, std::span<const int32_t> tokens, std::vector<uint32_t>& handles,
                      size_t& matched);
  Status prefix_insert(InstanceId id, std::span<const int32_t> tokens, std::span<const uint32_t> handles);

  bool has_page(InstanceId id, uint32_t handle) const;
  // Pages this instance can see through handles (for listings and quotas).
  uint32_t pages_held(InstanceId id) const;

  // ---- queued backend calls ----
  // `seq` names pages and Embeds by the instance's handles (kv_pages, embed_slots, Embed
  // outputs' embed_slot). Validated fully here: a bad request fails alone with BadHandle /
  // BadArgument and never reaches a batch.
  Status forward(InstanceId id, QueueId q, SequenceInput seq, Completion done);
  Status embed_tokens(InstanceId id, QueueId q, std::vector<int32_t> tokens,
                      std::vector<uint32_t> positions, std::vector<uint32_t> embed_handles,
                      Completion done);
  Status next_dist(InstanceId id, QueueId q, uint32_t embed_handle, uint32_t top_k, Completion done);
  Status copy_kv(InstanceId id, QueueId q, uint32_t src_handle, uint32_t dst_handle,
                 uint32_t src_offset, uint32_t dst_offset, uint32_t n, Completion done);

  // Last error detail of a failed synchronous validation on this thread (for messages).
  static const std::string& last_error();

  ControllerGauges gauges() const;
  // Observer for per-batch statistics (called on the dispatcher thread).
  void set_batch_observer(std::function<void(const BatchStats&)> fn);

 private:
  struct Payload;
  struct Pending {
    CallInfo info;
    std::shared_ptr<Payload> payload;
  };
  struct Queue {
    InstanceId owner = 0;
    int32_t priority = 0;
    std::vector<CallInfo> infos;                    // pending, oldest first (scheduler view)
    std::deque<std::shared_ptr<Payload>> payloads;  // parallel to infos
    uint64_t submitted = 0, completed = 0;
    std::vector<std::pair<uint64_t, std::function<void()>>> sync_waiters;
  };
  struct Instance {
    uint64_t launch_seq = 0;
    HandleTable pages, embeds;
    std::vector<QueueId> queues;
    std::vector<std::string> exports;  // non-persistent exports to drop on release
    KillFn on_kill;
  };
  struct Export {
    std::vector<uint32_t> pages;  // physical, one reference each held by the export
    InstanceId owner = 0;
    bool persistent = false;
  };

  Instance* find_instance(InstanceId id);
  Queue* find_queue(InstanceId id, QueueId q);
  Status enqueue(InstanceId id, QueueId q, CallInfo info, std::shared_ptr<Payload> payload);
  void release_instance_locked(InstanceId id, std::vector<std::function<void()>>& deferred);
  void drop_pending_locked(Queue& queue, const char* why, std::vector<std::function<void()>>& deferred);
  bool make_room_locked(InstanceId requester, uint32_t n, std::vector<std::function<void()>>& deferred);
  std::shared_ptr<Payload> split_chunk_locked(std::shared_ptr<Payload>& rest, CallInfo& info, uint32_t m);
  void dispatcher_loop();
  void execute(CallType type, std::vector<std::shared_ptr<Payload>>& calls);

  Backend& backend_;
  ControllerOptions options_;
  std::unique_ptr<DispatchPolicy> policy_;
  BatchLimits limits_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  RefCounts page_refs_;
  RefCounts embed_refs_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null when disabled; destroyed before the refs
  std::unordered_map<InstanceId, Instance> instances_;
  std::map<QueueId, Queue> queues_;  // ordered: stable scheduler input
  std::map<std::string, Export> exports_;
  QueueId next_queue_id_ = 1;
  uint64_t next_launch_seq_ = 1;
  uint64_t next_call_id_ = 1;
  ControllerGauges counters_;
  std::function<void(const BatchStats&)> batch_observer_;

  // The last batch, for the adaptive policy's wait for returning callers.
  std::vector<QueueId> last_batch_queues_;
  int64_t last_batch_end_ns_ = 0;
  int64_t last_backend_ns_ = 0;

  bool stop_ = false;
  std::thread dispatcher_;
};

}  // namespace pith
