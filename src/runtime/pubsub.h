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

class PubSub {
 public:
  void subscribe(const std::string& topic, const std::shared_ptr<Instance>& instance, uint32_t sub);
  void unsubscribe(const std::string& topic, const Instance* instance, uint32_t sub);
  // Returns the number of subscriptions reached.
  size_t broadcast(std::string_view topic, const std::string& message);
  size_t subscribers(std::string_view topic) const;

 private:
  struct Entry {
    std::weak_ptr<Instance> instance;
    const Instance* key;
    uint32_t sub;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Entry>, std::less<>> topics_;
};

}  // namespace pith::runtime
