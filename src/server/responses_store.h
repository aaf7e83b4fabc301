// The responses kept for previous_response_id and GET /v1/responses/{id}: in memory, bounded by
// count and by bytes (each entry's serialized size; the oldest stored is evicted first until
// both hold), gone when the server stops. An entry larger than the whole byte budget is not kept.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace pith::server {

class ResponsesStore {
 public:
  struct Stored {
    nlohmann::ordered_json response;      // the response object as returned
    nlohmann::ordered_json conversation;  // its input items, then its output as input items
  };

  ResponsesStore(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  void put(const std::string& id, Stored stored);
  std::optional<Stored> get(const std::string& id) const;
  bool erase(const std::string& id);
  size_t size() const;
  size_t bytes() const;

 private:
  mutable std::mutex mu_;
  void evict_oldest();
  size_t max_entries_, max_bytes_;
  size_t bytes_ = 0;
  std::list<std::string> order_;  // oldest first
  struct Entry {
    Stored stored;
    size_t bytes;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace pith::server
