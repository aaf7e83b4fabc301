#include "server/responses_store.h"

namespace pith::server {

void ResponsesStore::put(const std::string& id, Stored stored) {
  std::lock_guard lock(mu_);
  if (capacity_ == 0) return;
  if (auto it = entries_.find(id); it != entries_.end()) {
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  while (entries_.size() >= capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(id);
  entries_.emplace(id, Entry{std::move(stored), std::prev(order_.end())});
}

std::optional<ResponsesStore::Stored> ResponsesStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.stored;
}

bool ResponsesStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  order_.erase(it->second.position);
  entries_.erase(it);
  return true;
}

size_t ResponsesStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace pith::server
