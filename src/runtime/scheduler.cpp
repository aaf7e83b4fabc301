// The fiber scheduler thread. See scheduler.h.
#include "runtime/scheduler.h"

#include <vector>

#include "runtime/guest_execution.h"
#include "runtime/instance.h"

namespace pith::runtime {

Scheduler::Scheduler(uint64_t tick_ns) : tick_ns_(tick_ns) {
  install_signal_handlers();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  std::vector<std::shared_ptr<Instance>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [p, inst] : live_) live.push_back(inst);
  }
  for (auto& inst : live) inst->kill();
  {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return live_.empty(); });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Scheduler::start(std::shared_ptr<Instance> instance) {
  {
    std::lock_guard lock(mu_);
    live_[instance.get()] = instance;
    ready_.push_back(std::move(instance));
  }
  cv_.notify_one();
}

void Scheduler::make_ready(std::shared_ptr<Instance> instance) {
  {
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(instance));
  }
  cv_.notify_one();
}

size_t Scheduler::live() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

void Scheduler::loop() {
  AltSignalStack alt_stack;
  CpuTicker ticker(tick_ns_);
  for (;;) {
    std::shared_ptr<Instance> inst;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !ready_.empty(); });
      if (ready_.empty()) return;  // stop_ and nothing left
      inst = std::move(ready_.front());
      ready_.pop_front();
    }
    if (inst->ended()) continue;  // a stale wake-up after the end
    inst->run_slice();
    if (inst->ended()) {
      // Leave the live set first, so a client woken by finish() sees a consistent count; the
      // destructor still cannot stop the loop before finish() returns (same thread).
      {
        std::lock_guard lock(mu_);
        live_.erase(inst.get());
      }
      inst->finish();
      std::lock_guard lock(mu_);
      if (live_.empty()) idle_cv_.notify_all();
    }
  }
}

}  // namespace pith::runtime
