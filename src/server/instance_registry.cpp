#include "server/instance_registry.h"

namespace pith::server {

void InstanceRegistry::add(std::shared_ptr<InstanceRecord> r) {
  std::lock_guard lock(mu_);
  records_[r->id] = std::move(r);
}

std::shared_ptr<InstanceRecord> InstanceRegistry::find(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<InstanceRecord>> InstanceRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<InstanceRecord>> out;
  for (const auto& [_, r] : records_) out.push_back(r);
  return out;
}

size_t InstanceRegistry::running() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [_, r] : records_) n += !r->finished();
  return n;
}

size_t InstanceRegistry::running_for(const std::string& owner) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [_, r] : records_) n += r->owner == owner && !r->finished();
  return n;
}

void InstanceRegistry::reap(std::chrono::steady_clock::duration ttl) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  std::erase_if(records_, [&](const auto& kv) {
    std::lock_guard l(kv.second->mu);
    return kv.second->exit && now - kv.second->finished_at > ttl;
  });
}

void InstanceRegistry::mark_ended_by(uint64_t id, pith_status_t code) {
  auto rec = find(id);
  if (!rec) return;
  std::lock_guard lock(rec->mu);
  rec->ended_by = code;
}

}  // namespace pith::server
