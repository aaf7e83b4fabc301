// The responses kept for previous_response_id and GET /v1/responses/{id}: in memory, bounded by
// count (the oldest stored is evicted first), gone when the server stops.
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

  explicit ResponsesStore(size_t capacity = 1000) : capacity_(capacity) {}

  void put(const std::string& id, Stored stored);
  std::optional<Stored> get(const std::string& id) const;
  bool erase(const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<std::string> order_;  // oldest first
  struct Entry {
    Stored stored;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace pith::server
