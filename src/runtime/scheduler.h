// Scheduler: one OS thread that runs many instance fibers, cooperatively. An instance runs until
// it ends, parks in a blocking host call (future wait, receive) or yields; the thread then runs
// the next ready instance. Blocking never holds the thread. The thread owns a CPU-time ticker
// (SIGVTALRM every tick_ns of thread CPU time) that charges the running instance and enforces
// its CPU limit, and an alternate signal stack for stack-overflow faults.
//
// The scheduler keeps every live instance alive (shared_ptr) until it has ended and finished.
// Destruction kills the remaining instances, waits for them to end, and joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace pith::runtime {

class Instance;

class Scheduler {
 public:
  explicit Scheduler(uint64_t tick_ns = 10'000'000);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void start(std::shared_ptr<Instance> instance);       // any thread
  void make_ready(std::shared_ptr<Instance> instance);  // any thread
  size_t live() const;                                  // instances started and not yet finished

 private:
  void loop();

  const uint64_t tick_ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::shared_ptr<Instance>> ready_;
  std::unordered_map<Instance*, std::shared_ptr<Instance>> live_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pith::runtime
