// What `pith serve` measures about the serving stack: the Prometheus series sampled from the
// controller (KV pages, queues, prefix cache, batches), the compile-time histogram of uploaded
// programs, and the periodic stats line in the log (rates since the previous line).
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "control/controller.h"
#include "server/metrics.h"
#include "server/program_store.h"

namespace pith {
class ServingStack;
}

namespace pith::server {

// Registers the stack's gauges and counters and observes every forward batch's size.
void register_serving_metrics(Metrics& metrics, ServingStack& stack);

// Observes the native compile time of each program once, when its code becomes ready.
class CompileTimes {
 public:
  explicit CompileTimes(Metrics& metrics);
  void observe(const std::vector<ProgramInfo>& programs);

 private:
  Histogram& histogram_;
  std::set<std::string> observed_;  // hashes already counted
};

// The stats line for the interval between two gauge readings `dt_s` seconds apart.
std::string stats_line(const ControllerGauges& last, const ControllerGauges& now, double dt_s,
                       size_t running_inferlets);

// Writes stats_line() to the log every `interval_s` seconds while there is work; silent while
// idle, and off for an interval of 0.
class StatsLog {
 public:
  explicit StatsLog(double interval_s) : interval_s_(interval_s) {}
  // Called often (e.g. every second); logs when the interval has passed.
  void tick(const ControllerGauges& now, size_t running_inferlets, bool any_running);

 private:
  using Clock = std::chrono::steady_clock;
  double interval_s_;
  Clock::time_point last_at_ = Clock::now();
  ControllerGauges last_{};
  bool have_last_ = false;
};

}  // namespace pith::server
