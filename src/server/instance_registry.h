// InstanceRegistry: the instances launched through the HTTP API (and the OpenAI endpoint),
// with what a client may ask about them after the fact: program, args, owner key, event log,
// exit status. Finished instances stay listed (and their events readable) for a while so a
// client that reconnects late still learns how its instance ended.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/instance.h"
#include "server/event_log.h"

namespace pith::server {

struct InstanceRecord {
  uint64_t id = 0;
  std::string program;       // SHA-256 of the module
  std::string program_name;  // built-in name, "" for uploads
  std::vector<std::string> args;
  std::string owner;   // API key that launched it ("" without auth)
  bool detach = true;  // false: ends when its event streams are gone (docs/server-api.md)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::shared_ptr<EventLog> events;

  // Guarded by mu.
  mutable std::mutex mu;
  std::shared_ptr<runtime::Instance> instance;  // reset when it ends
  std::optional<runtime::ExitStatus> exit;
  std::chrono::steady_clock::time_point finished_at;
  // Why the host ended it, as an ABI status (PITH_OK: it was not the host's doing, or a client
  // asked), e.g. PITH_ERR_OUT_OF_KV_PAGES when the contention policy took its KV memory.
  pith_status_t ended_by = PITH_OK;

  // I/O thread only.
  int streams = 0;
  bool had_stream = false;
  std::shared_ptr<asio::steady_timer> orphan_timer;

  bool finished() const {
    std::lock_guard lock(mu);
    return exit.has_value();
  }
  std::shared_ptr<runtime::Instance> live() const {
    std::lock_guard lock(mu);
    return instance;
  }
};

class InstanceRegistry {
 public:
  // Instance ids as clients see them: "<n>", or with --replica-id "<replica>-<run>-<n>", where
  // <run> (base 36 milliseconds at start) tells this run from an earlier one of the same replica.
  // The replica in the id lets a stock proxy send every call for an instance to the replica that
  // runs it (docs/scale-out.md). Call before serving.
  void set_replica(std::string replica);
  std::string external_id(uint64_t id) const;
  // The local id behind a client's id ("<n>" is accepted too); nullopt if the text is not an id
  // of this run of this replica, with `why_not` saying so when it is another replica's or an
  // earlier run's.
  std::optional<uint64_t> parse_id(std::string_view text, std::string* why_not) const;

  void add(std::shared_ptr<InstanceRecord> r);
  std::shared_ptr<InstanceRecord> find(uint64_t id) const;
  std::vector<std::shared_ptr<InstanceRecord>> list() const;
  size_t running() const;
  size_t running_for(const std::string& owner) const;
  // Records why the host ended instance `id` (InstanceRecord::ended_by); unknown ids are ignored.
  void mark_ended_by(uint64_t id, pith_status_t code);
  // Forgets instances that finished more than `ttl` ago.
  void reap(std::chrono::steady_clock::duration ttl);

 private:
  std::string replica_, run_;
  mutable std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<InstanceRecord>> records_;
};

}  // namespace pith::server
