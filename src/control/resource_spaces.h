// The control layer's resource spaces: every instance's handle tables for KV pages, Embeds and
// the recurrent states of hybrid models (paper §4.1; states: resource_states.cpp), the reference
// counts underneath, exports, the radix prefix cache, the per-instance page quota and contention:
// the kill policy (terminating newer instances when an older one needs pages) and the bookkeeping
// of suspension (an instance's private pages leave the pool for host memory and come back under new
// ids; contention_policy.h, kv_suspension.cpp).
//
// Not thread-safe: the Controller calls it under its lock. Each call either succeeds or fails
// with a Failure and leaves every count as it was. The queues themselves (and their pending
// calls) belong to the Controller; this class only records which instance owns which queue, and
// asks the Controller to release a contention victim.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/slot_pool.h"
#include "control/handle_table.h"
#include "control/prefix_cache.h"
#include "control/ref_counts.h"
#include "control/status.h"

namespace pith {

using InstanceId = uint64_t;
using QueueId = uint64_t;

// Called (outside the controller's lock) when the contention policy terminates an instance.
using KillFn = std::function<void(const std::string& reason)>;

// Releases a contention victim completely (its queued calls first, then release_instance) and
// arranges for on_kill to run outside the lock.
using EvictFn = std::function<void(InstanceId victim, KillFn on_kill)>;

struct ResourceOptions {
  uint32_t page_size = 0;
  uint32_t max_kv_pages_per_instance = 0;  // 0: no quota
  uint32_t max_states_per_instance = 0;    // 0: no quota
  bool prefix_cache = true;
};

class ResourceSpaces {
 public:
  // `states`: the backend's recurrent-state pool (capacity 0 for models without recurrent
  // layers; then the state calls fail with OutOfStates and the prefix cache keeps no
  // checkpoints).
  ResourceSpaces(SlotPool& pages, SlotPool& embeds, SlotPool& states,
                 const ResourceOptions& options);
  ~ResourceSpaces();

  // ---- instances and their queues
  // Instances registered later are "newer": contention terminates the newest first.
  void add_instance(InstanceId id, KillFn on_kill);
  bool has_instance(InstanceId id) const { return instances_.count(id) != 0; }
  size_t n_instances() const { return instances_.size(); }
  std::vector<InstanceId> instance_ids() const;
  Result<void> add_queue(InstanceId id, QueueId q);
  void remove_queue(InstanceId id, QueueId q);
  std::vector<QueueId> queues_of(InstanceId id) const;
  // Drops every handle and non-persistent export of the instance (no-op if unknown). Drop its
  // queued calls first: they hold references too (a suspended instance's calls release only
  // the pages is_swapped() says are not).
  void release_instance(InstanceId id);
  uint64_t launch_seq(InstanceId id) const;
  // Hands over the instance's kill callback (for ending it from the controller).
  KillFn take_on_kill(InstanceId id);

  // ---- pages and Embeds (handles in the instance's space)
  // When the pool is short, evicts LRU prefix-cache pages, then newer instances (through `evict`;
  // an empty one kills nobody and fails with OutOfKvPages).
  // Allocations replace `handles`' contents and keep its capacity (a guest allocates on every
  // decode step; the success path allocates no memory once the vectors have grown).
  Result<void> alloc_pages(InstanceId id, uint32_t n, const EvictFn& evict,
                           std::vector<uint32_t>& handles);
  // QuotaExceeded when n more pages would pass the per-instance quota.
  Result<void> check_quota(InstanceId id, uint32_t n) const;
  // Gives back up to n unused prefix-cache pages (LRU first).
  void evict_cached(uint32_t n);
  Result<void> dealloc_pages(InstanceId id, std::span<const uint32_t> handles);
  Result<void> alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<void> dealloc_embeds(InstanceId id, std::span<const uint32_t> handles);
  bool has_page(InstanceId id, uint32_t handle) const;
  uint32_t pages_held(InstanceId id) const;
  // The instance's tables, for building calls (nullptr: unknown instance).
  const HandleTable* page_table(InstanceId id) const;
  const HandleTable* embed_table(InstanceId id) const;

  // ---- recurrent states of hybrid models (resource_states.cpp): one state per sequence,
  // named by handle like pages. A fresh state holds garbage until the controller clears it.
  // When the pool is short, unused prefix-cache checkpoints are evicted first.
  // `reserved` states stay free for others (promised to woken waiters).
  Result<void> alloc_states(InstanceId id, uint32_t n, std::vector<uint32_t>& handles,
                            uint32_t reserved = 0);
  Result<void> dealloc_states(InstanceId id, std::span<const uint32_t> handles);
  const HandleTable* state_table(InstanceId id) const;
  uint32_t states_held(InstanceId id) const;
  // A state published by name: the export holds its own reference (like export_pages); an
  // import gives the importer a handle on the same state, which it copies before advancing it.
  Result<void> export_state(InstanceId id, const std::string& name, uint32_t handle,
                            bool persistent);
  Result<uint32_t> import_state(InstanceId id, const std::string& name);
  Result<void> remove_state_export(const std::string& name);
  RefCounts& state_refs() { return state_refs_; }
  uint32_t states_free() const { return state_refs_.n_free(); }
  uint32_t state_capacity() const { return state_capacity_; }
  // OutOfStates when n more states would pass the per-instance quota.
  Result<void> check_state_quota(InstanceId id, uint32_t n) const;
  // Gives back up to n unused prefix-cache checkpoints (least recently used first).
  void evict_state_checkpoints(uint32_t n);
  bool hybrid() const { return state_capacity_ > 0; }

  // ---- exports: named page sets holding their own references
  Result<void> export_pages(InstanceId id, const std::string& name,
                            std::span<const uint32_t> handles, bool persistent);
  Result<std::vector<uint32_t>> import_pages(InstanceId id, const std::string& name);
  Result<void> remove_export(const std::string& name);
  std::vector<std::string> list_exports() const;

  // ---- radix prefix cache: match imports whole cached pages; `matched` is their token count
  // Hybrid models: `state` is a new handle on the checkpoint after the matched tokens (0: no
  // match), and an insert names the state after exactly its pages' tokens (state_handle).
  struct PrefixMatch {
    std::vector<uint32_t> handles;
    size_t matched = 0;
    uint32_t state = 0;
    size_t shared = 0;  // tokens cached as pages (>= matched; hybrid: past the checkpoint)
  };
  Result<PrefixMatch> prefix_match(InstanceId id, std::span<const int32_t> tokens,
                                   uint32_t adapter = 0);
  Result<void> prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                             std::span<const uint32_t> handles, uint32_t adapter = 0,
                             uint32_t state_handle = 0);

  // References held by queued and running calls.
  RefCounts& page_refs() { return page_refs_; }
  RefCounts& embed_refs() { return embed_refs_; }
  uint32_t pages_free() const { return page_refs_.n_free(); }
  uint32_t embeds_free() const { return embed_refs_.n_free(); }
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
  uint64_t instances_killed_for_memory() const { return killed_for_memory_; }

  // ---- suspension (driven by the Controller, kv_suspension.cpp)
  // The pages only this instance references, through its handles and through `pending` (the
  // page references its queued calls hold), with the number of references each has.
  void private_pages(InstanceId id, std::span<const uint32_t> pending, std::vector<uint32_t>& pages,
                     std::vector<uint32_t>& refs) const;
  // The same for recurrent states (`pending`: its queued calls' state references).
  void private_states(InstanceId id, std::span<const uint32_t> pending,
                      std::vector<uint32_t>& states, std::vector<uint32_t>& refs) const;
  // What a suspension takes out of the pools: private pages and states with the references each
  // held, and their saved contents in the same order.
  struct SwapOut {
    std::vector<uint32_t> pages, page_refs;
    std::vector<std::byte> page_image;
    std::vector<uint32_t> states, state_refs;
    std::vector<std::byte> state_image;
  };
  // Returns them to their pools. Their ids stay in the instance's handles and queued calls,
  // stale, until swap_in.
  void swap_out(InstanceId id, SwapOut out);
  bool suspended(InstanceId id) const { return !suspended_.empty() && suspended_.count(id) != 0; }
  const std::set<InstanceId>& suspended_instances() const { return suspended_; }
  size_t swapped_pages(InstanceId id) const;   // pages swap_in needs
  size_t swapped_states(InstanceId id) const;  // states swap_in needs
  // Whether `page` (`state`), as named by the suspended instance's handles or calls, is a stale
  // id.
  bool is_swapped(InstanceId id, uint32_t page) const;
  bool is_state_swapped(InstanceId id, uint32_t state) const;
  // Takes one fresh page (state) per swapped one (the caller made sure they are free), restores
  // their references and rewrites the instance's handles. The caller loads the images into
  // the fresh ids and moves its queued calls from the stale ids to the fresh ones.
  struct SwapIn {
    std::vector<uint32_t> stale, fresh;
    std::vector<std::byte> image;
    std::vector<uint32_t> stale_states, fresh_states;
    std::vector<std::byte> state_image;
  };
  SwapIn swap_in(InstanceId id);
  size_t swap_bytes() const { return swap_bytes_; }  // images held in host memory

 private:
  struct Instance {
    uint64_t launch_seq = 0;
    HandleTable pages, embeds, states;
    std::vector<QueueId> queues;
    std::vector<std::string> exports;  // non-persistent exports to drop on release
    std::vector<std::string> state_exports;
    KillFn on_kill;
    // While suspended (suspended_ lists it): the stale ids of its swapped pages and states, the
    // references each held, and their images (kv_page_bytes / state_bytes each, in order).
    std::vector<uint32_t> swapped, swapped_refs;
    std::unordered_set<uint32_t> swapped_set;
    std::vector<std::byte> image;
    std::vector<uint32_t> swapped_states, swapped_state_refs;
    std::unordered_set<uint32_t> swapped_state_set;
    std::vector<std::byte> state_image;
  };
  struct StateExport {
    uint32_t state = 0;  // physical, one reference held by the export
    InstanceId owner = 0;
    bool persistent = false;
  };
  struct Export {
    std::vector<uint32_t> pages;  // physical, one reference each held by the export
    InstanceId owner = 0;
    bool persistent = false;
  };

  Instance* find(InstanceId id);
  const Instance* find(InstanceId id) const;
  bool make_room(InstanceId requester, uint32_t n, const EvictFn& evict);

  ResourceOptions options_;
  uint32_t page_capacity_ = 0;
  uint32_t state_capacity_ = 0;
  RefCounts page_refs_;
  RefCounts embed_refs_;
  RefCounts state_refs_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null when disabled; destroyed before the refs
  std::unordered_map<InstanceId, Instance> instances_;
  std::map<std::string, Export> exports_;
  std::map<std::string, StateExport> state_exports_;
  uint64_t next_launch_seq_ = 1;
  uint64_t killed_for_memory_ = 0;
  size_t swap_bytes_ = 0;
  std::set<InstanceId> suspended_;
  std::vector<uint32_t> phys_scratch_;  // physical ids of the allocation in progress
};

}  // namespace pith
