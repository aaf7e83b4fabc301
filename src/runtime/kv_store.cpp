// The runtime-wide key-value store. See kv_store.h.
#include "runtime/kv_store.h"

namespace pith::runtime {

std::optional<std::string> LocalKvStore::get(std::string_view key) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

pith_status_t LocalKvStore::set(std::string_view key, std::string_view value) {
  if (key.size() > limits_.max_key || value.size() > limits_.max_value) return PITH_ERR_LIMIT;
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  size_t old = it == map_.end() ? 0 : key.size() + it->second.size();
  size_t total = total_ - old + key.size() + value.size();
  if (total > limits_.max_total) return PITH_ERR_LIMIT;
  if (it == map_.end()) {
    map_.emplace(std::string(key), std::string(value));
  } else {
    it->second.assign(value);
  }
  total_ = total;
  return PITH_OK;
}

bool LocalKvStore::erase(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  total_ -= key.size() + it->second.size();
  map_.erase(it);
  return true;
}

bool LocalKvStore::contains(std::string_view key) const {
  std::lock_guard lock(mu_);
  return map_.find(key) != map_.end();
}

size_t LocalKvStore::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace pith::runtime
