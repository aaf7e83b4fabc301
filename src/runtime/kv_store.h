// KvStore: the small persistent key-value store shared by all inferlets of one runtime (Pie's
// store_get/store_set): state that outlives an instance, e.g. a cached prompt's export name.
// LocalKvStore keeps it in this process; with --state-store it lives in Redis (shared_state.h)
// and is shared by every replica.
// Thread-safe; bounded in key size, value size and total bytes so a guest cannot exhaust host
// memory through it (a set over the bound fails with PITH_ERR_LIMIT and changes nothing).
#pragma once

#include <pith/abi.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pith::runtime {

struct KvStoreLimits {
  size_t max_key = 1024;
  size_t max_value = 1 << 20;
  size_t max_total = 64 << 20;  // the local store's bound; a shared store's is the server's own
};

// Thrown by a store that lives in another process (shared_state.h) when it cannot answer; the
// host call returns `status` to the guest and logs the message to the instance.
struct StoreFailure : std::runtime_error {
  StoreFailure(pith_status_t s, const std::string& message)
      : std::runtime_error(message), status(s) {}
  pith_status_t status;
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual std::optional<std::string> get(std::string_view key) const = 0;
  virtual pith_status_t set(std::string_view key, std::string_view value) = 0;
  virtual bool erase(std::string_view key) = 0;  // true if it existed
  virtual bool contains(std::string_view key) const = 0;
};

// The store of one process (the default): a bounded map.
class LocalKvStore final : public KvStore {
 public:
  explicit LocalKvStore(KvStoreLimits limits = {}) : limits_(limits) {}
  std::optional<std::string> get(std::string_view key) const override;
  pith_status_t set(std::string_view key, std::string_view value) override;
  bool erase(std::string_view key) override;
  bool contains(std::string_view key) const override;
  size_t size() const;

 private:
  KvStoreLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> map_;
  size_t total_ = 0;
};

}  // namespace pith::runtime
