// The LoRA adapters a server has loaded, by name (--lora NAME=PATH, POST /v1/load_lora_adapter).
// The registry gives each adapter a backend id (never reused, so the prefix cache can key on
// it), loads it into the backend, and hands out leases: an instance that opened an adapter
// holds a lease, and an unloaded adapter's weights stay in the backend until the last lease is
// dropped, so unloading never breaks a generation in flight; the name is free again at once.
//
// Thread-safe. Leases may be dropped on any thread (the backend's unload_adapter allows it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace pith {

// What the server lists about an adapter (/v1/models, metrics, logs).
struct AdapterInfo {
  std::string name;
  std::string source;   // path it was loaded from
  std::string format;   // "peft" or "gguf"
  std::string targets;  // "q_proj, v_proj"
  uint32_t rank = 0;
  float alpha = 0;
  size_t weight_bytes = 0;
  int64_t loaded_unix = 0;
  uint32_t id = 0;     // backend id (set by the registry)
  uint32_t users = 0;  // leases held now (instances using it)
};

class AdapterRegistry;

// Held by an instance that uses an adapter; keeps it loaded in the backend.
class AdapterLease {
 public:
  ~AdapterLease();
  AdapterLease(const AdapterLease&) = delete;
  AdapterLease& operator=(const AdapterLease&) = delete;
  uint32_t id() const { return info_.id; }
  const AdapterInfo& info() const { return info_; }

 private:
  friend class AdapterRegistry;
  AdapterLease(Backend& backend, AdapterInfo info) : backend_(backend), info_(std::move(info)) {}
  Backend& backend_;
  AdapterInfo info_;
};

class AdapterRegistry {
 public:
  AdapterRegistry(Backend& backend, uint32_t max_loaded) : backend_(backend), max_(max_loaded) {}

  // Loads `adapter` under `name` (letters, digits, '-', '_', '.', '/', ':'; at most 128). Throws
  // pith::Error when the name is invalid or taken, max_loaded adapters are loaded, or the backend
  // refuses it (no LoRA kernels, shapes that do not fit the model).
  AdapterInfo load(const std::string& name, std::shared_ptr<const LoraAdapter> adapter,
                   AdapterInfo info);
  // Forgets `name` (false when not loaded); its weights go when the last lease does.
  bool unload(const std::string& name);
  // A lease on a loaded adapter, or nullptr.
  std::shared_ptr<const AdapterLease> open(std::string_view name) const;
  // Throws pith::Error when `name` is not a valid adapter name (load checks it too; callers
  // check first to refuse before reading an adapter from disk).
  static void check_name(const std::string& name);

  std::vector<AdapterInfo> list() const;  // by name, with current users
  size_t size() const;
  uint32_t max_loaded() const { return max_; }

 private:
  Backend& backend_;
  const uint32_t max_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const AdapterLease>, std::less<>> loaded_;
  uint32_t next_id_ = 1;
};

}  // namespace pith
