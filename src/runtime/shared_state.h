// SharedState: the runtime-wide state that replicas of one deployment share, kept in Redis
// (`pith serve --state-store redis://…`): the inferlet key-value store, broadcast/subscribe, the
// uploaded programs (so an instance can be launched on any replica), and which replica exported
// which KV pages (the pages themselves stay where they were computed; an import elsewhere gets
// an error that says so). docs/scale-out.md describes the deployment.
//
// Redis layout (every key under "pith:"):
//   pith:kv:<key>           the store's values
//   pith:topic:<topic>      pub/sub channels; every replica PSUBSCRIBEs pith:topic:*
//   pith:program:<sha256>   uploaded module bytes; pith:program-name:<sha256> the name
//   pith:export:<name>      the replica that holds an exported page set
// When Redis is down, calls fail with PITH_ERR_NETWORK (the instance log says why) and work
// again once it is back; nothing in the replica stops.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/kv_store.h"
#include "runtime/pubsub.h"
#include "runtime/redis_client.h"

namespace pith::runtime {

class SharedState final : public KvStore, public PubSubRelay {
 public:
  // Checks the URL (throws pith::Error); connects lazily. `replica` names this process in
  // export records.
  SharedState(const std::string& url, KvStoreLimits limits, std::string replica);
  ~SharedState() override;

  // Starts delivering the deployment's broadcasts into `local` (its subscriptions).
  void deliver_to(PubSub* local);
  // True once the pub/sub subscription is active (tests wait for it).
  bool wait_subscribed(std::chrono::milliseconds timeout);
  std::string describe() const { return client_.url().redacted(); }
  bool subscribed() const { return subscriber_ && subscriber_->subscribed(); }
  uint64_t failures() const { return client_.failures(); }  // calls that failed
  const std::string& replica() const { return replica_; }

  // KvStore; failures throw StoreFailure.
  std::optional<std::string> get(std::string_view key) const override;
  pith_status_t set(std::string_view key, std::string_view value) override;
  bool erase(std::string_view key) override;
  bool contains(std::string_view key) const override;

  // PubSubRelay.
  void publish(std::string_view topic, const std::string& message) override;

  // Programs by SHA-256 (the caller checks the hash of what comes back).
  void put_program(const std::string& hash, std::string_view wasm, const std::string& name);
  std::optional<std::pair<std::string, std::string>> get_program(const std::string& hash);
  void forget_program(const std::string& hash);

  // Export records: best effort (the export itself is local and already done).
  void note_export(std::string_view name);
  void forget_export(std::string_view name);
  std::optional<std::string> export_owner(std::string_view name);

 private:
  KvStoreLimits limits_;
  std::string replica_;
  mutable RedisClient client_;
  std::unique_ptr<RedisSubscriber> subscriber_;
};

}  // namespace pith::runtime
