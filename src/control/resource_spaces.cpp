#include "control/resource_spaces.h"

#include <fmt/format.h>

#include <algorithm>

#include "control/contention_policy.h"

namespace pith {

namespace {

Failure unknown_instance() {
  return {Status::Terminated, "unknown instance"};
}

}  // namespace

ResourceSpaces::ResourceSpaces(SlotPool& pages, SlotPool& embeds, SlotPool& states,
                               const ResourceOptions& options)
    : options_(options),
      page_capacity_(pages.capacity()),
      state_capacity_(states.capacity()),
      page_refs_(pages),
      embed_refs_(embeds),
      state_refs_(states) {
  if (options.prefix_cache)
    prefix_cache_ = std::make_unique<PrefixCache>(page_refs_, options.page_size,
                                                  hybrid() ? &state_refs_ : nullptr);
}

ResourceSpaces::~ResourceSpaces() {
  for (auto id : instance_ids()) release_instance(id);
  prefix_cache_.reset();
}

ResourceSpaces::Instance* ResourceSpaces::find(InstanceId id) {
  auto it = instances_.find(id);
  return it == instances_.end() ? nullptr : &it->second;
}

const ResourceSpaces::Instance* ResourceSpaces::find(InstanceId id) const {
  auto it = instances_.find(id);
  return it == instances_.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------- instances

void ResourceSpaces::add_instance(InstanceId id, KillFn on_kill) {
  Instance& inst = instances_[id];
  inst.launch_seq = next_launch_seq_++;
  inst.on_kill = std::move(on_kill);
}

std::vector<InstanceId> ResourceSpaces::instance_ids() const {
  std::vector<InstanceId> ids;
  for (const auto& [id, _] : instances_) ids.push_back(id);
  return ids;
}

Result<void> ResourceSpaces::add_queue(InstanceId id, QueueId q) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  inst->queues.push_back(q);
  return {};
}

void ResourceSpaces::remove_queue(InstanceId id, QueueId q) {
  if (Instance* inst = find(id)) std::erase(inst->queues, q);
}

std::vector<QueueId> ResourceSpaces::queues_of(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? inst->queues : std::vector<QueueId>{};
}

void ResourceSpaces::release_instance(InstanceId id) {
  auto it = instances_.find(id);
  if (it == instances_.end()) return;
  Instance& inst = it->second;
  inst.pages.for_each([&](uint32_t, uint32_t phys) {
    if (!inst.swapped_set.count(phys)) page_refs_.release(phys);
  });
  suspended_.erase(id);
  swap_bytes_ -= inst.image.size() + inst.state_image.size();
  inst.embeds.for_each([&](uint32_t, uint32_t phys) { embed_refs_.release(phys); });
  inst.states.for_each([&](uint32_t, uint32_t phys) {
    if (!inst.swapped_state_set.count(phys)) state_refs_.release(phys);
  });
  for (const auto& name : inst.state_exports) {
    auto eit = state_exports_.find(name);
    if (eit != state_exports_.end() && eit->second.owner == id && !eit->second.persistent) {
      state_refs_.release(eit->second.state);
      state_exports_.erase(eit);
    }
  }
  for (const auto& name : inst.exports) {
    auto eit = exports_.find(name);
    if (eit != exports_.end() && eit->second.owner == id && !eit->second.persistent) {
      page_refs_.release(eit->second.pages);
      exports_.erase(eit);
    }
  }
  instances_.erase(it);
}

KillFn ResourceSpaces::take_on_kill(InstanceId id) {
  Instance* inst = find(id);
  return inst ? std::move(inst->on_kill) : KillFn{};
}

uint64_t ResourceSpaces::launch_seq(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? inst->launch_seq : 0;
}

// ---------------------------------------------------------------- pages and Embeds

Result<void> ResourceSpaces::check_quota(InstanceId id, uint32_t n) const {
  const Instance* inst = find(id);
  if (!inst) return unknown_instance();
  if (options_.max_kv_pages_per_instance &&
      inst->pages.size() + n > options_.max_kv_pages_per_instance)
    return Failure{Status::QuotaExceeded,
                   fmt::format("{} pages requested while holding {}, quota {}", n,
                               inst->pages.size(), options_.max_kv_pages_per_instance)};
  return {};
}

void ResourceSpaces::evict_cached(uint32_t n) {
  if (prefix_cache_ && n > 0) prefix_cache_->evict(n);
}

bool ResourceSpaces::make_room(InstanceId requester, uint32_t n, const EvictFn& evict) {
  // First give back cached pages nobody uses (LRU leaves of the prefix cache); then the
  // contention policy (paper §5.2) terminates newer instances until enough pages are free.
  if (prefix_cache_ && page_refs_.n_free() < n) prefix_cache_->evict(n - page_refs_.n_free());
  const uint64_t requester_seq = instances_.at(requester).launch_seq;
  std::vector<InstanceUsage> usage;
  while (page_refs_.n_free() < n) {
    if (!evict) return false;
    usage.clear();
    for (const auto& [id, inst] : instances_)
      usage.push_back({id, inst.launch_seq, inst.pages.size()});
    auto victim = choose_victim(usage, requester_seq);
    if (!victim) return false;
    KillFn kill = std::move(instances_.at(*victim).on_kill);
    evict(*victim, std::move(kill));
    PITH_CHECK(!has_instance(*victim));
    ++killed_for_memory_;
  }
  return true;
}

Result<void> ResourceSpaces::alloc_pages(InstanceId id, uint32_t n, const EvictFn& evict,
                                         std::vector<uint32_t>& handles) {
  if (auto quota = check_quota(id, n); !quota) return quota;
  Instance* inst = find(id);
  if (page_refs_.n_free() < n && !make_room(id, n, evict))
    return Failure{Status::OutOfKvPages, fmt::format("{} pages requested, {} free of {}", n,
                                                     page_refs_.n_free(), page_capacity_)};
  if (!page_refs_.allocate(n, phys_scratch_))
    return Failure{Status::OutOfKvPages, "pages still held by in-flight calls"};
  inst = find(id);
  handles.clear();
  for (uint32_t p : phys_scratch_) handles.push_back(inst->pages.insert(p));
  return {};
}

Result<void> ResourceSpaces::dealloc_pages(InstanceId id, std::span<const uint32_t> handles) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  for (uint32_t h : handles)
    if (!inst->pages.lookup(h)) return Failure{Status::BadHandle, fmt::format("page handle {}", h)};
  for (uint32_t h : handles) {
    auto phys = inst->pages.erase(h);
    if (phys) page_refs_.release(*phys);  // a duplicate handle in the list erases once
  }
  return {};
}

Result<void> ResourceSpaces::alloc_embeds(InstanceId id, uint32_t n,
                                          std::vector<uint32_t>& handles) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  if (!embed_refs_.allocate(n, phys_scratch_))
    return Failure{Status::OutOfEmbeds,
                   fmt::format("{} embeds requested, {} free", n, embed_refs_.n_free())};
  handles.clear();
  for (uint32_t p : phys_scratch_) handles.push_back(inst->embeds.insert(p));
  return {};
}

Result<void> ResourceSpaces::dealloc_embeds(InstanceId id, std::span<const uint32_t> handles) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  for (uint32_t h : handles)
    if (!inst->embeds.lookup(h))
      return Failure{Status::BadHandle, fmt::format("embed handle {}", h)};
  for (uint32_t h : handles) {
    auto phys = inst->embeds.erase(h);
    if (phys) embed_refs_.release(*phys);
  }
  return {};
}

bool ResourceSpaces::has_page(InstanceId id, uint32_t handle) const {
  const Instance* inst = find(id);
  return inst && inst->pages.lookup(handle).has_value();
}

uint32_t ResourceSpaces::pages_held(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? static_cast<uint32_t>(inst->pages.size()) : 0;
}

const HandleTable* ResourceSpaces::page_table(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? &inst->pages : nullptr;
}

const HandleTable* ResourceSpaces::embed_table(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? &inst->embeds : nullptr;
}

// ---------------------------------------------------------------- suspension

namespace {

// The ids in `table` and `pending` whose every reference (in `counts`) is one of them, with
// how many each has: what only this instance holds.
void private_ids(const HandleTable& table, std::span<const uint32_t> pending,
                 const RefCounts& counts, std::vector<uint32_t>& ids, std::vector<uint32_t>& refs) {
  std::unordered_map<uint32_t, uint32_t> mine;  // id -> references this instance holds
  table.for_each([&](uint32_t, uint32_t phys) { ++mine[phys]; });
  for (uint32_t p : pending) ++mine[p];
  for (const auto& [id, n] : mine)
    if (counts.count(id) == n) {  // nobody else: no peer, export, cache entry or batch
      ids.push_back(id);
      refs.push_back(n);
    }
}

// Takes one fresh id per stale one from `counts` (with as many references as each had) and
// rewrites `table`; returns the fresh ids.
std::vector<uint32_t> take_fresh(RefCounts& counts, HandleTable& table,
                                 const std::vector<uint32_t>& stale,
                                 const std::vector<uint32_t>& refs) {
  std::vector<uint32_t> fresh;
  PITH_CHECK(counts.allocate(static_cast<uint32_t>(stale.size()), fresh));
  std::unordered_map<uint32_t, uint32_t> moved;
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (uint32_t r = 1; r < refs[i]; ++r) counts.retain(fresh[i]);
    moved.emplace(stale[i], fresh[i]);
  }
  table.remap([&](uint32_t p) {
    auto it = moved.find(p);
    return it == moved.end() ? p : it->second;
  });
  return fresh;
}

}  // namespace

void ResourceSpaces::private_pages(InstanceId id, std::span<const uint32_t> pending,
                                   std::vector<uint32_t>& pages,
                                   std::vector<uint32_t>& refs) const {
  pages.clear();
  refs.clear();
  const Instance* inst = find(id);
  if (inst && !suspended(id)) private_ids(inst->pages, pending, page_refs_, pages, refs);
}

void ResourceSpaces::private_states(InstanceId id, std::span<const uint32_t> pending,
                                    std::vector<uint32_t>& states,
                                    std::vector<uint32_t>& refs) const {
  states.clear();
  refs.clear();
  const Instance* inst = find(id);
  if (inst && !suspended(id)) private_ids(inst->states, pending, state_refs_, states, refs);
}

void ResourceSpaces::swap_out(InstanceId id, SwapOut out) {
  Instance* inst = find(id);
  PITH_CHECK(inst && !suspended(id) && out.pages.size() == out.page_refs.size() &&
             out.states.size() == out.state_refs.size());
  for (size_t i = 0; i < out.pages.size(); ++i)
    for (uint32_t r = 0; r < out.page_refs[i]; ++r) page_refs_.release(out.pages[i]);
  for (size_t i = 0; i < out.states.size(); ++i)
    for (uint32_t r = 0; r < out.state_refs[i]; ++r) state_refs_.release(out.states[i]);
  suspended_.insert(id);
  inst->swapped_set = {out.pages.begin(), out.pages.end()};
  inst->swapped = std::move(out.pages);
  inst->swapped_refs = std::move(out.page_refs);
  inst->swapped_state_set = {out.states.begin(), out.states.end()};
  inst->swapped_states = std::move(out.states);
  inst->swapped_state_refs = std::move(out.state_refs);
  swap_bytes_ += out.page_image.size() + out.state_image.size();
  inst->image = std::move(out.page_image);
  inst->state_image = std::move(out.state_image);
}

size_t ResourceSpaces::swapped_pages(InstanceId id) const {
  const Instance* inst = find(id);
  return inst && suspended(id) ? inst->swapped.size() : 0;
}

size_t ResourceSpaces::swapped_states(InstanceId id) const {
  const Instance* inst = find(id);
  return inst && suspended(id) ? inst->swapped_states.size() : 0;
}

bool ResourceSpaces::is_swapped(InstanceId id, uint32_t page) const {
  const Instance* inst = find(id);
  return inst && inst->swapped_set.count(page) != 0;
}

bool ResourceSpaces::is_state_swapped(InstanceId id, uint32_t state) const {
  const Instance* inst = find(id);
  return inst && inst->swapped_state_set.count(state) != 0;
}

ResourceSpaces::SwapIn ResourceSpaces::swap_in(InstanceId id) {
  Instance* inst = find(id);
  PITH_CHECK(inst && suspended(id));
  SwapIn in;
  in.fresh = take_fresh(page_refs_, inst->pages, inst->swapped, inst->swapped_refs);
  in.fresh_states =
      take_fresh(state_refs_, inst->states, inst->swapped_states, inst->swapped_state_refs);
  in.stale = std::move(inst->swapped);
  in.image = std::move(inst->image);
  in.stale_states = std::move(inst->swapped_states);
  in.state_image = std::move(inst->state_image);
  swap_bytes_ -= in.image.size() + in.state_image.size();
  suspended_.erase(id);
  inst->swapped.clear();
  inst->swapped_refs.clear();
  inst->swapped_set.clear();
  inst->image.clear();
  inst->swapped_states.clear();
  inst->swapped_state_refs.clear();
  inst->swapped_state_set.clear();
  inst->state_image.clear();
  return in;
}

// ---------------------------------------------------------------- exports

Result<void> ResourceSpaces::export_pages(InstanceId id, const std::string& name,
                                          std::span<const uint32_t> handles, bool persistent) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  if (exports_.count(name)) return Failure{Status::AlreadyExists, "export '" + name + "' exists"};
  Export ex;
  ex.owner = id;
  ex.persistent = persistent;
  for (uint32_t h : handles) {
    auto p = inst->pages.lookup(h);
    if (!p) return Failure{Status::BadHandle, fmt::format("page handle {}", h)};
    ex.pages.push_back(*p);
  }
  page_refs_.retain(ex.pages);
  if (!persistent) inst->exports.push_back(name);
  exports_.emplace(name, std::move(ex));
  return {};
}

Result<std::vector<uint32_t>> ResourceSpaces::import_pages(InstanceId id, const std::string& name) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  auto it = exports_.find(name);
  if (it == exports_.end()) return Failure{Status::NotFound, "no export '" + name + "'"};
  std::vector<uint32_t> handles;
  for (uint32_t p : it->second.pages) {
    page_refs_.retain(p);
    handles.push_back(inst->pages.insert(p));
  }
  return handles;
}

Result<void> ResourceSpaces::remove_export(const std::string& name) {
  auto it = exports_.find(name);
  if (it == exports_.end()) return Failure{Status::NotFound, "no export '" + name + "'"};
  page_refs_.release(it->second.pages);
  exports_.erase(it);
  return {};
}

std::vector<std::string> ResourceSpaces::list_exports() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : exports_) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------- prefix cache

Result<ResourceSpaces::PrefixMatch> ResourceSpaces::prefix_match(InstanceId id,
                                                                 std::span<const int32_t> tokens,
                                                                 uint32_t adapter) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  PrefixMatch m;
  if (!prefix_cache_) return m;
  std::vector<uint32_t> phys;
  uint32_t state = PrefixCache::kNoState;
  m.matched = prefix_cache_->match(tokens, phys, adapter, &state, &m.shared);
  for (uint32_t p : phys) m.handles.push_back(inst->pages.insert(p));  // takes match's reference
  if (state != PrefixCache::kNoState) m.state = inst->states.insert(state);
  return m;
}

Result<void> ResourceSpaces::prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                                           std::span<const uint32_t> handles, uint32_t adapter,
                                           uint32_t state_handle) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  const size_t ps = options_.page_size;
  if (tokens.size() < handles.size() * ps)
    return Failure{Status::BadArgument,
                   fmt::format("{} pages need {} tokens, got {}", handles.size(),
                               handles.size() * ps, tokens.size())};
  std::vector<uint32_t> phys;
  for (uint32_t h : handles) {
    auto p = inst->pages.lookup(h);
    if (!p) return Failure{Status::BadHandle, fmt::format("page handle {}", h)};
    phys.push_back(*p);
  }
  uint32_t state = PrefixCache::kNoState;
  if (state_handle != 0) {
    auto s = inst->states.lookup(state_handle);
    if (!s) return Failure{Status::BadHandle, fmt::format("state handle {}", state_handle)};
    state = *s;
  }
  if (hybrid() && state == PrefixCache::kNoState)
    return Failure{Status::BadArgument,
                   "the model has recurrent layers: a prefix is cached with the state after its "
                   "tokens (prefix_insert_state)"};
  if (prefix_cache_) prefix_cache_->insert(tokens, phys, adapter, state);
  return {};
}

}  // namespace pith
