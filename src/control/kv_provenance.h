// KV provenance: what wrote each KV page, so that a suspended instance's pages can be dropped and
// recomputed from their tokens when it resumes, instead of swapped to host memory
// (ControllerOptions::preemption = Recompute; kv_suspension.cpp runs it).
//
// A page has a *recipe* when everything in it was written by causal forwards over known tokens:
// token inputs, or Embeds that embed_tokens filled and nothing overwrote since; no custom mask,
// no LoRA adapter; slots written in order from slot 0 (a write that starts inside the filled part
// truncates it there, as a speculative decoder's rejected drafts are overwritten). The recipe
// also names the context the slots attended to: the pages before this one in the caller's page
// table, each with the version it had. Anything else (copy_kv into the page, a custom mask, a
// failed batch, a swap-in) leaves the page *opaque*: it can only be saved.
//
// Versions: every write gives the page a new, globally unique version, so a (page, version) pair
// names one content; a context is valid while each of its pages still has its version. Contexts
// are shared lists (a node per page, pointing to the pages before it), canonicalised per page, so
// the pages of one sequence share them and a long context costs a node per page, not a copy each.
//
// Not thread-safe: the Controller calls it under its lock, recording each batch when it takes it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/forward_batch.h"

namespace pith {

struct KvContextNode {
  uint32_t page = 0;
  uint64_t version = 0;
  std::shared_ptr<const KvContextNode> before;  // the pages before it, or null
};
using KvContext = std::shared_ptr<const KvContextNode>;  // the last page of a context; null: empty

struct KvRecipe {
  KvContext context;  // what slot 0 attended to (and, with the earlier slots, every later slot)
  std::vector<int32_t> tokens;      // slot i's input, i < tokens.size() (the filled part)
  std::vector<uint32_t> positions;  // slot i's position
};

// A page that left the pool with its instance: its id then, its version and recipe.
struct DetachedPage {
  uint32_t page = 0;
  uint64_t version = 0;
  std::optional<KvRecipe> recipe;
};

// The forwards that rebuild dropped pages (replay_plan). Sequences in dependency order: a
// sequence's context pages are resident before it runs (kept, loaded, or written by an earlier
// sequence of the plan).
struct ReplayPlan {
  std::vector<SequenceInput> sequences;
  std::vector<std::vector<uint32_t>> writes;  // per sequence: the pages it fills (fresh ids)
  uint32_t tokens = 0;
};

class KvProvenance {
 public:
  KvProvenance(uint32_t n_pages, uint32_t n_embeds, uint32_t page_size);

  // ---- writes, in the order the backend runs them
  void on_forward(const SequenceInput& seq);  // physical ids
  void on_embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> slots);
  void on_opaque_write(uint32_t page);  // copy_kv's destination, a failed batch, a loaded image
  void on_embed_overwritten(uint32_t slot);  // a hidden state, or a failed embed_tokens

  uint64_t version(uint32_t page) const { return version_[page]; }
  const KvRecipe* recipe(uint32_t page) const;  // null: opaque

  // ---- suspension
  // Of an instance's private pages `own` (it can see the pages `visible`, a superset), which can be
  // dropped and recomputed: a recipe, and every page of its context still at its version and
  // either resident for the instance (visible, not own) or restored with it (own, and if
  // recomputed, full). Returns one flag per page of `own`.
  std::vector<bool> replayable(std::span<const uint32_t> own,
                               std::span<const uint32_t> visible) const;
  // Takes the records of pages leaving the pool (their ids may be reused at once).
  std::vector<DetachedPage> detach(std::span<const uint32_t> pages);
  // The forwards that recompute `dropped` (detached records) into fresh pages: `fresh_of` maps
  // each of the instance's stale ids (dropped and saved alike) to its new id; context pages not in
  // it stay where they are and must still hold their versions. Chains of full pages over one
  // context become one sequence. nullopt: a kept context page changed meanwhile.
  std::optional<ReplayPlan> replay_plan(
      std::vector<DetachedPage> dropped,
      const std::unordered_map<uint32_t, uint32_t>& fresh_of) const;

 private:
  // The canonical node for `page` at its current version after `before`, and the canonical list
  // for `pages`.
  KvContext extend(KvContext before, uint32_t page);
  KvContext context_of(std::span<const uint32_t> pages);
  void set_opaque(uint32_t page);

  uint32_t page_size_;
  uint64_t next_version_ = 1;
  std::vector<uint64_t> version_;                // per page
  std::vector<std::optional<KvRecipe>> recipe_;  // per page
  std::vector<KvContext> node_;                  // per page: its last canonical node
  std::vector<int32_t> embed_token_;             // per Embed slot: the token it holds, or -1
};

// Whether two contexts list the same (page, version) pairs.
bool same_context(const KvContextNode* a, const KvContextNode* b);

}  // namespace pith
