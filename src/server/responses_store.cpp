#include "server/responses_store.h"

namespace pith::server {

namespace {

size_t size_of(const ResponsesStore::Stored& s) {
  using nlohmann::json;
  return s.response.dump(-1, ' ', false, json::error_handler_t::replace).size() +
         s.conversation.dump(-1, ' ', false, json::error_handler_t::replace).size();
}

}  // namespace

void ResponsesStore::evict_oldest() {
  auto it = entries_.find(order_.front());
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  order_.pop_front();
}

void ResponsesStore::put(const std::string& id, Stored stored) {
  const size_t bytes = size_of(stored);
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  if (max_entries_ == 0 || bytes > max_bytes_) return;
  while (!order_.empty() && (entries_.size() >= max_entries_ || bytes_ + bytes > max_bytes_))
    evict_oldest();
  order_.push_back(id);
  entries_.emplace(id, Entry{std::move(stored), bytes, std::prev(order_.end())});
  bytes_ += bytes;
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
  bytes_ -= it->second.bytes;
  order_.erase(it->second.position);
  entries_.erase(it);
  return true;
}

size_t ResponsesStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

size_t ResponsesStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace pith::server
