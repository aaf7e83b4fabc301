// The control layer's resource spaces: every instance's handle tables for KV pages and Embeds
// (paper §4.1), the reference counts underneath, exports, the radix prefix cache, the per-instance
// page quota and contention (terminating newer instances when an older one needs pages).
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
#include <span>
#include <string>
#include <unordered_map>
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
  bool prefix_cache = true;
};

class ResourceSpaces {
 public:
  ResourceSpaces(SlotPool& pages, SlotPool& embeds, const ResourceOptions& options);
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
  // queued calls first: they hold references too.
  void release_instance(InstanceId id);

  // ---- pages and Embeds (handles in the instance's space)
  // When the pool is short, evicts LRU prefix-cache pages, then newer instances (through `evict`).
  // Allocations replace `handles`' contents and keep its capacity (a guest allocates on every
  // decode step; the success path allocates no memory once the vectors have grown).
  Result<void> alloc_pages(InstanceId id, uint32_t n, const EvictFn& evict,
                           std::vector<uint32_t>& handles);
  Result<void> dealloc_pages(InstanceId id, std::span<const uint32_t> handles);
  Result<void> alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles);
  Result<void> dealloc_embeds(InstanceId id, std::span<const uint32_t> handles);
  bool has_page(InstanceId id, uint32_t handle) const;
  uint32_t pages_held(InstanceId id) const;
  // The instance's tables, for building calls (nullptr: unknown instance).
  const HandleTable* page_table(InstanceId id) const;
  const HandleTable* embed_table(InstanceId id) const;

  // ---- exports: named page sets holding their own references
  Result<void> export_pages(InstanceId id, const std::string& name,
                            std::span<const uint32_t> handles, bool persistent);
  Result<std::vector<uint32_t>> import_pages(InstanceId id, const std::string& name);
  Result<void> remove_export(const std::string& name);
  std::vector<std::string> list_exports() const;

  // ---- radix prefix cache: match imports whole cached pages; `matched` is their token count
  struct PrefixMatch {
    std::vector<uint32_t> handles;
    size_t matched = 0;
  };
  Result<PrefixMatch> prefix_match(InstanceId id, std::span<const int32_t> tokens);
  Result<void> prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                             std::span<const uint32_t> handles);

  // References held by queued and running calls.
  RefCounts& page_refs() { return page_refs_; }
  RefCounts& embed_refs() { return embed_refs_; }
  uint32_t pages_free() const { return page_refs_.n_free(); }
  uint32_t embeds_free() const { return embed_refs_.n_free(); }
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
  uint64_t instances_killed_for_memory() const { return killed_for_memory_; }

 private:
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

  Instance* find(InstanceId id);
  const Instance* find(InstanceId id) const;
  bool make_room(InstanceId requester, uint32_t n, const EvictFn& evict);

  ResourceOptions options_;
  uint32_t page_capacity_ = 0;
  RefCounts page_refs_;
  RefCounts embed_refs_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null when disabled; destroyed before the refs
  std::unordered_map<InstanceId, Instance> instances_;
  std::map<std::string, Export> exports_;
  uint64_t next_launch_seq_ = 1;
  uint64_t killed_for_memory_ = 0;
  std::vector<uint32_t> phys_scratch_;  // physical ids of the allocation in progress
};

}  // namespace pith
