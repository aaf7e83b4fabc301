// ResourceSpaces' recurrent states (hybrid models): per-instance handles over the backend's state
// pool, reference counted like pages (a queued forward or copy holds one), exportable by name.
#include <fmt/format.h>

#include "control/resource_spaces.h"

namespace pith {

namespace {

Failure unknown_instance() {
  return {Status::Terminated, "unknown instance"};
}
Failure bad_state(uint32_t h) {
  return {Status::BadHandle, fmt::format("state handle {}", h)};
}

}  // namespace

Result<void> ResourceSpaces::alloc_states(InstanceId id, uint32_t n, std::vector<uint32_t>& handles,
                                          uint32_t reserved) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  if (!hybrid())
    return Failure{Status::Unsupported, "the model has no recurrent layers: it keeps no state"};
  if (auto quota = check_state_quota(id, n); !quota) return quota;
  // Checkpoints nobody uses go before an allocation fails.
  const uint32_t want = n + reserved;
  if (state_refs_.n_free() < want) evict_state_checkpoints(want - state_refs_.n_free());
  if (state_refs_.n_free() < want || !state_refs_.allocate(n, phys_scratch_))
    return Failure{
        Status::OutOfStates,
        reserved == 0
            ? fmt::format("{} recurrent states requested, {} free of {} (--state-memory)", n,
                          state_refs_.n_free(), state_capacity_)
            : fmt::format("{} recurrent states requested, {} free of {} (--state-memory), "
                          "{} of them promised to waiting instances",
                          n, state_refs_.n_free(), state_capacity_, reserved)};
  handles.clear();
  for (uint32_t p : phys_scratch_) handles.push_back(inst->states.insert(p));
  return {};
}

Result<void> ResourceSpaces::check_state_quota(InstanceId id, uint32_t n) const {
  const Instance* inst = find(id);
  if (!inst) return unknown_instance();
  if (options_.max_states_per_instance &&
      inst->states.size() + n > options_.max_states_per_instance)
    return Failure{Status::OutOfStates,
                   fmt::format("{} states requested while holding {}, quota {}", n,
                               inst->states.size(), options_.max_states_per_instance)};
  return {};
}

void ResourceSpaces::evict_state_checkpoints(uint32_t n) {
  if (prefix_cache_ && n > 0) prefix_cache_->evict_states(n);
}

Result<void> ResourceSpaces::dealloc_states(InstanceId id, std::span<const uint32_t> handles) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  for (uint32_t h : handles)
    if (!inst->states.lookup(h)) return bad_state(h);
  for (uint32_t h : handles)
    if (auto phys = inst->states.erase(h)) state_refs_.release(*phys);
  return {};
}

const HandleTable* ResourceSpaces::state_table(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? &inst->states : nullptr;
}

uint32_t ResourceSpaces::states_held(InstanceId id) const {
  const Instance* inst = find(id);
  return inst ? static_cast<uint32_t>(inst->states.size()) : 0;
}

Result<void> ResourceSpaces::export_state(InstanceId id, const std::string& name, uint32_t handle,
                                          bool persistent) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  auto phys = inst->states.lookup(handle);
  if (!phys) return bad_state(handle);
  if (state_exports_.count(name))
    return Failure{Status::AlreadyExists, "state export '" + name + "' exists"};
  state_refs_.retain(*phys);
  state_exports_.emplace(name, StateExport{*phys, id, persistent});
  if (!persistent) inst->state_exports.push_back(name);
  return {};
}

Result<uint32_t> ResourceSpaces::import_state(InstanceId id, const std::string& name) {
  Instance* inst = find(id);
  if (!inst) return unknown_instance();
  auto it = state_exports_.find(name);
  if (it == state_exports_.end())
    return Failure{Status::NotFound, "no state export '" + name + "'"};
  state_refs_.retain(it->second.state);
  return inst->states.insert(it->second.state);
}

Result<void> ResourceSpaces::remove_state_export(const std::string& name) {
  auto it = state_exports_.find(name);
  if (it == state_exports_.end())
    return Failure{Status::NotFound, "no state export '" + name + "'"};
  state_refs_.release(it->second.state);
  state_exports_.erase(it);
  return {};
}

}  // namespace pith
