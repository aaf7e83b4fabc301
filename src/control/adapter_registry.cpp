#include "control/adapter_registry.h"

#include <cctype>
#include <chrono>

#include "common/error.h"

namespace pith {

AdapterLease::~AdapterLease() {
  backend_.unload_adapter(info_.id);
}

void AdapterRegistry::check_name(const std::string& name) {
  if (name.empty() || name.size() > 128)
    fail("adapter name '{}' must have 1 to 128 characters", name);
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) &&
        std::string_view("-_./:").find(ch) == std::string_view::npos)
      fail("adapter name '{}': only letters, digits and - _ . / : are allowed", name);
}

AdapterInfo AdapterRegistry::load(const std::string& name,
                                  std::shared_ptr<const LoraAdapter> adapter, AdapterInfo info) {
  check_name(name);
  std::lock_guard lock(mu_);
  if (loaded_.count(name)) fail("an adapter named '{}' is already loaded", name);
  if (loaded_.size() >= max_)
    fail("{} adapters are loaded, the most this server holds (--max-loras); unload one first",
         loaded_.size());
  info.name = name;
  info.id = next_id_;
  info.loaded_unix = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  backend_.load_adapter(info.id, std::move(adapter));  // throws when the backend refuses
  ++next_id_;
  loaded_.emplace(name, std::shared_ptr<const AdapterLease>(new AdapterLease(backend_, info)));
  return info;
}

bool AdapterRegistry::unload(const std::string& name) {
  std::shared_ptr<const AdapterLease> last;  // released outside the lock
  std::lock_guard lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) return false;
  last = std::move(it->second);
  loaded_.erase(it);
  return true;
}

std::shared_ptr<const AdapterLease> AdapterRegistry::open(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = loaded_.find(name);
  return it == loaded_.end() ? nullptr : it->second;
}

std::vector<AdapterInfo> AdapterRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<AdapterInfo> out;
  for (const auto& [_, lease] : loaded_) {
    AdapterInfo i = lease->info();
    i.users = static_cast<uint32_t>(lease.use_count() - 1);
    out.push_back(std::move(i));
  }
  return out;
}

size_t AdapterRegistry::size() const {
  std::lock_guard lock(mu_);
  return loaded_.size();
}

}  // namespace pith
