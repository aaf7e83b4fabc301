// Topic registry for broadcast/subscribe. See pubsub.h.
#include "runtime/pubsub.h"

#include <algorithm>

#include "runtime/instance.h"

namespace pith::runtime {

void PubSub::subscribe(const std::string& topic, const std::shared_ptr<Instance>& instance,
                       uint32_t sub) {
  std::lock_guard lock(mu_);
  topics_[topic].push_back({instance, instance.get(), sub});
}

void PubSub::unsubscribe(const std::string& topic, const Instance* instance, uint32_t sub) {
  std::lock_guard lock(mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const Entry& e) { return e.key == instance && e.sub == sub; }),
          v.end());
  if (v.empty()) topics_.erase(it);
}

size_t PubSub::broadcast(std::string_view topic, const std::string& message) {
  if (relay_) {
    relay_->publish(topic, message);
    return 0;
  }
  return deliver(topic, message);
}

size_t PubSub::deliver(std::string_view topic, const std::string& message) {
  std::lock_guard lock(mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return 0;
  size_t n = 0;
  for (const Entry& e : it->second) {
    if (auto inst = e.instance.lock()) {
      inst->deliver(e.sub, message);
      ++n;
    }
  }
  return n;
}

size_t PubSub::subscribers(std::string_view topic) const {
  std::lock_guard lock(mu_);
  auto it = topics_.find(topic);
  return it == topics_.end() ? 0 : it->second.size();
}

}  // namespace pith::runtime
