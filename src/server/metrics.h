// Metrics: a small Prometheus registry (counters, gauges, histograms with optional labels)
// rendered in the text exposition format by GET /metrics. Updates are lock-free for counters
// and gauges; histograms take a short per-series lock. Names carry the `pith_` prefix.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pith::server {

class Counter {
 public:
  void inc(double v = 1) {
    double cur = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> buckets_;  // per bound, then +Inf (not cumulative)
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Exponential bucket bounds: start, start*factor, ... (n bounds).
std::vector<double> exponential_buckets(double start, double factor, int n);

class Metrics {
 public:
  // Families are created on first use; a (name, labels) pair names one series. `labels` is the
  // rendered label set, e.g. `kind="prefill"` (empty for none).
  Counter& counter(const std::string& name, const std::string& help,
                   const std::string& labels = "");
  Histogram& histogram(const std::string& name, const std::string& help,
                       const std::vector<double>& bounds, const std::string& labels = "");
  // Gauges are sampled at render time from a callback.
  void gauge(const std::string& name, const std::string& help, std::function<double()> read,
             const std::string& labels = "");
  // A gauge whose label values change (vLLM's lora_requests_info names the running adapters):
  // `read` returns the rendered labels and the value at render time.
  void gauge_labeled(const std::string& name, const std::string& help,
                     std::function<std::pair<std::string, double>()> read);
  // A counter kept elsewhere (e.g. the controller's totals), sampled at render time.
  void counter_fn(const std::string& name, const std::string& help, std::function<double()> read,
                  const std::string& labels = "");

  std::string render() const;

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
    std::map<std::string, std::function<double()>> gauges;
    std::vector<std::function<std::pair<std::string, double>()>> labeled_gauges;
  };
  Family& family(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace pith::server
