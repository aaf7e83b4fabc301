#include "server/instance_registry.h"

#include <fmt/format.h>

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

void InstanceRegistry::set_replica(std::string replica) {
  replica_ = std::move(replica);
  uint64_t ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  run_.clear();
  do {
    run_.insert(run_.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[ms % 36]);
    ms /= 36;
  } while (ms);
}

std::string InstanceRegistry::external_id(uint64_t id) const {
  return replica_.empty() ? std::to_string(id) : replica_ + "-" + run_ + "-" + std::to_string(id);
}

std::optional<uint64_t> InstanceRegistry::parse_id(std::string_view text,
                                                   std::string* why_not) const {
  if (auto last = text.rfind('-'); last != std::string_view::npos) {
    // REPLICA-RUN-N from the right: a replica name may itself contain '-' (pod names do).
    auto mid = text.substr(0, last).rfind('-');
    if (mid == std::string_view::npos) return std::nullopt;
    std::string_view replica = text.substr(0, mid), run = text.substr(mid + 1, last - mid - 1);
    if (replica != replica_) {
      *why_not = fmt::format("its id names replica '{}', this is replica '{}'", replica,
                             replica_.empty() ? "(unnamed)" : replica_);
      return std::nullopt;
    }
    if (run != run_) {
      *why_not = fmt::format(
          "it belonged to an earlier run of replica '{}', which ended (restarted since); its "
          "state is lost",
          replica_);
      return std::nullopt;
    }
    text = text.substr(last + 1);
  }
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

void InstanceRegistry::mark_ended_by(uint64_t id, pith_status_t code) {
  auto rec = find(id);
  if (!rec) return;
  std::lock_guard lock(rec->mu);
  rec->ended_by = code;
}

}  // namespace pith::server
