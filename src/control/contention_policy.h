// Which instance to terminate when KV pages run out (paper §5.2): a small policy over plain data,
// so it can be read, tested and replaced alone.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace pith {

struct InstanceUsage {
  uint64_t id = 0;
  uint64_t launch_seq = 0;  // larger = launched later
  size_t pages = 0;         // pages it can see through handles
};

// The most recently launched instance that holds pages and was launched after the requester;
// nullopt when there is none (the requester is then refused, never a peer launched before it).
inline std::optional<uint64_t> choose_victim(std::span<const InstanceUsage> instances,
                                             uint64_t requester_launch_seq) {
  std::optional<uint64_t> victim;
  uint64_t newest = requester_launch_seq;
  for (const InstanceUsage& u : instances)
    if (u.launch_seq > newest && u.pages > 0) {
      newest = u.launch_seq;
      victim = u.id;
    }
  return victim;
}

}  // namespace pith
