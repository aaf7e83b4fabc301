// PubSub: the runtime-wide topic registry behind broadcast/subscribe (Pie's inter-inferlet
// messaging). A broadcast copies the message into every subscription of the topic; each
// subscription belongs to one instance and is only reachable through that instance's handle.
// Lock order: PubSub::mu_ before any Instance lock (deliver() takes the instance's).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace pith::runtime {

class Instance;

// Carries broadcasts to other processes (shared_state.h: Redis pub/sub); it delivers every
// message, this process's own included, back through PubSub::deliver().
class PubSubRelay {
 public:
  virtual ~PubSubRelay() = default;
  // Throws StoreFailure (kv_store.h) when the message cannot be sent.
  virtual void publish(std::string_view topic, const std::string& message) = 0;
};

class PubSub {
 public:
  void subscribe(const std::string& topic, const std::shared_ptr<Instance>& instance, uint32_t sub);
  void unsubscribe(const std::string& topic, const Instance* instance, uint32_t sub);
  // Through the relay when there is one (returns 0: the reach is not known here), else
  // deliver().
  size_t broadcast(std::string_view topic, const std::string& message);
  // Copies the message into this process's subscriptions of the topic; returns how many.
  size_t deliver(std::string_view topic, const std::string& message);
  size_t subscribers(std::string_view topic) const;
  void set_relay(PubSubRelay* relay) { relay_ = relay; }  // before any instance runs

 private:
  PubSubRelay* relay_ = nullptr;
  struct Entry {
    std::weak_ptr<Instance> instance;
    const Instance* key;
    uint32_t sub;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Entry>, std::less<>> topics_;
};

}  // namespace pith::runtime
