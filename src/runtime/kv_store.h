// KvStore: the small persistent key-value store shared by all inferlets of one runtime (Pie's
// store_get/store_set): state that outlives an instance, e.g. a cached prompt's export name.
// Thread-safe; bounded in key size, value size and total bytes so a guest cannot exhaust host
// memory through it (a set over the bound fails with PITH_ERR_LIMIT and changes nothing).
#pragma once

#include <pith/abi.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace pith::runtime {

struct KvStoreLimits {
  size_t max_key = 1024;
  size_t max_value = 1 << 20;
  size_t max_total = 64 << 20;
};

class KvStore {
 public:
  explicit KvStore(KvStoreLimits limits = {}) : limits_(limits) {}
  std::optional<std::string> get(std::string_view key) const;
  pith_status_t set(std::string_view key, std::string_view value);
  bool erase(std::string_view key);  // true if it existed
  bool contains(std::string_view key) const;
  size_t size() const;

 private:
  KvStoreLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> map_;
  size_t total_ = 0;
};

}  // namespace pith::runtime
