// Who gives way when KV pages run out: small policies over plain data, so they can be read,
// tested and replaced alone.
//
// Two policies (ControllerOptions::kv_pressure):
//  - suspend (the default): instances are ranked by priority, then age (older first). The
//    highest-ranked instance that needs pages may suspend instances it outranks (lowest rank
//    first), and any instance idle for a while (longest idle first); a suspended instance's pages
//    go to host memory and come back when it is again the highest-ranked one that fits. Nothing
//    is lost: suspension is latency. (kv_suspension.cpp runs it.)
//  - kill (the paper's §5.2 baseline): the newest instance that holds pages and was launched
//    after the requester is terminated.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace pith {

struct InstanceUsage {
  uint64_t id = 0;
  uint64_t launch_seq = 0;  // larger = launched later
  size_t pages = 0;         // pages it can see through handles
};

// Kill policy: the most recently launched instance that holds pages and was launched after the
// requester; nullopt when there is none (the requester is then refused, never a peer launched
// before it).
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

// Suspend policy: an instance's standing for KV pages. Higher priority (its highest queue
// priority) first, then the older launch.
struct KvRank {
  int32_t priority = 0;
  uint64_t launch_seq = 0;
};

inline bool outranks(const KvRank& a, const KvRank& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.launch_seq < b.launch_seq;
}

struct SuspendCandidate {
  uint64_t id = 0;
  KvRank rank;
  size_t frees = 0;      // what suspending it would give back: private pages, or states
  int64_t idle_ns = -1;  // time since its last call while it has nothing queued; -1: busy
};

// The order in which to suspend candidates to make room for `requester`: first those idle for at
// least idle_after_ns (longest idle first), then those the requester outranks, lowest rank first.
// Candidates that would give nothing back are left out.
inline std::vector<uint64_t> suspension_order(std::span<const SuspendCandidate> candidates,
                                              const KvRank& requester, int64_t idle_after_ns) {
  std::vector<const SuspendCandidate*> idle, outranked;
  for (const SuspendCandidate& c : candidates) {
    if (c.frees == 0) continue;
    if (idle_after_ns > 0 && c.idle_ns >= idle_after_ns)
      idle.push_back(&c);
    else if (outranks(requester, c.rank))
      outranked.push_back(&c);
  }
  std::sort(idle.begin(), idle.end(), [](auto* a, auto* b) { return a->idle_ns > b->idle_ns; });
  std::sort(outranked.begin(), outranked.end(),
            [](auto* a, auto* b) { return outranks(b->rank, a->rank); });
  std::vector<uint64_t> order;
  for (auto* c : idle) order.push_back(c->id);
  for (auto* c : outranked) order.push_back(c->id);
  return order;
}

}  // namespace pith
