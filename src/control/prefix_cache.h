// The radix prefix cache (SGLang-style, ../docs/control.md): a system-wide tree over token ids
// whose nodes own reference-counted KV pages, so requests that share a prompt prefix (a system
// prompt, a few-shot header, an earlier turn) compute its K/V once.
//
// Granularity is the KV page: an edge is one full page of `page_size` tokens, so the tree is a
// radix tree over the alphabet of page-sized token blocks (a partial last page is never
// cached; its owner recomputes or copies it). Cached K/V assumes the standard layout the SDK's
// Context::fill uses: positions 0..n-1, causal attention.
//
// Ownership: the cache holds one reference on every page in the tree. match() gives the caller
// one more reference per matched page (read-only sharing: the SDK copies before it writes).
// Eviction removes least-recently-used *leaves* whose page nobody else references; an internal
// node, or a leaf some inferlet still uses, is never evicted.
//
// Adapters: K/V computed under a LoRA adapter differs from the base model's, so every entry is
// keyed by the adapter id too (0 = base); a prefix cached for one adapter never matches another.
// Ids are never reused, so an unloaded adapter's entries are simply never matched again and go
// in LRU order.
//
// Hybrid models (recurrent layers beside attention): K/V pages alone do not resume a sequence,
// its recurrent state must come back too. Such a cache is built over the state pool as well and
// keeps state *checkpoints* on nodes: insert() attaches the state after the inserted prefix to
// the prefix's last node, and match() only ends on a node with a checkpoint, handing out the
// pages up to it and the checkpoint (one new reference each). Checkpoints are evicted with
// their node, or alone (evict_states) when the state pool runs short.
//
// Not thread-safe: the controller calls it under its lock. A constructor over any RefCounts
// pool keeps it testable without a model.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "control/ref_counts.h"

namespace pith {

struct PrefixCacheStats {
  uint64_t hit_tokens = 0;   // prompt tokens served from the cache
  uint64_t miss_tokens = 0;  // prompt tokens the callers had to compute
  uint64_t inserted_pages = 0;
  uint64_t evicted_pages = 0;
  uint32_t cached_pages = 0;   // pages currently owned by the tree
  uint32_t cached_states = 0;  // state checkpoints currently owned by the tree (hybrid models)
  uint64_t evicted_states = 0;
};

class PrefixCache {
 public:
  static constexpr uint32_t kNoState = UINT32_MAX;

  // `states`: the recurrent-state pool of a hybrid model (checkpoints), null for plain models.
  PrefixCache(RefCounts& refs, uint32_t page_size, RefCounts* states = nullptr);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Longest cached prefix of `tokens`, in whole pages. Appends the physical pages to `pages`
  // (one new reference each, owned by the caller) and returns the matched token count. With a
  // state pool the match ends on the deepest node with a checkpoint, whose state goes to
  // `*state` (one new reference); nothing matches where no checkpoint is on the path.
  // `shared` (optional) receives the tokens the tree holds pages for, checkpoint or not: where a
  // hybrid prompt diverges from what is cached, and so where a new checkpoint serves the most.
  size_t match(std::span<const int32_t> tokens, std::vector<uint32_t>& pages, uint32_t adapter = 0,
               uint32_t* state = nullptr, size_t* shared = nullptr);

  // Offers the computed pages of tokens[0 : pages.size() * page_size]. Blocks not yet cached
  // adopt the caller's page (the cache takes its own reference); blocks already cached keep
  // their existing page, so concurrent inserts of one prefix converge on one copy.
  // Returns the number of pages adopted. `state` (with a state pool): the recurrent state after
  // exactly these pages' tokens, kept as the checkpoint of their last node unless it has one.
  size_t insert(std::span<const int32_t> tokens, std::span<const uint32_t> pages,
                uint32_t adapter = 0, uint32_t state = kNoState);

  // Evicts LRU unreferenced leaves until `n` pages went back to the pool or nothing more is
  // evictable. Returns the number of pages freed.
  uint32_t evict(uint32_t n);
  // Pages that evict() could free right now (leaves and chains only the cache holds).
  uint32_t evictable_pages() const;
  // Drops up to n checkpoints only the cache holds, least recently used first (their nodes and
  // pages stay). Returns the number of states freed.
  uint32_t evict_states(uint32_t n);

  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Node;
  Node* find_child(Node* node, std::span<const int32_t> block, uint32_t adapter) const;
  void touch(Node* node);
  void remove_leaf(Node* node);

  RefCounts& refs_;
  RefCounts* states_;
  uint32_t page_size_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  std::set<std::pair<uint64_t, Node*>> leaves_;  // (last use, leaf): LRU order
  PrefixCacheStats stats_;
};

}  // namespace pith
