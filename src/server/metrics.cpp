#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace pith::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard lock(mu_);
  ++buckets_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t run = 0;
  for (uint64_t b : buckets_) s.cumulative.push_back(run += b);
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i, start *= factor) out.push_back(start);
  return out;
}

Metrics::Family& Metrics::family(const std::string& name, const std::string& help, Type type) {
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    fail("metric {} registered with two types", name);
  }
  return it->second;
}

Counter& Metrics::counter(const std::string& name, const std::string& help,
                          const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::Counter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Histogram& Metrics::histogram(const std::string& name, const std::string& help,
                              const std::vector<double>& bounds, const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::Histogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

void Metrics::gauge(const std::string& name, const std::string& help, std::function<double()> read,
                    const std::string& labels) {
  std::lock_guard lock(mu_);
  family(name, help, Type::Gauge).gauges[labels] = std::move(read);
}

void Metrics::gauge_labeled(const std::string& name, const std::string& help,
                            std::function<std::pair<std::string, double>()> read) {
  std::lock_guard lock(mu_);
  family(name, help, Type::Gauge).labeled_gauges.push_back(std::move(read));
}

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string braces(const std::string& labels, const std::string& extra = "") {
  std::string all = labels;
  if (!extra.empty()) all += (all.empty() ? "" : ",") + extra;
  return all.empty() ? "" : "{" + all + "}";
}

}  // namespace

void Metrics::counter_fn(const std::string& name, const std::string& help,
                         std::function<double()> read, const std::string& labels) {
  std::lock_guard lock(mu_);
  family(name, help, Type::Counter).gauges[labels] = std::move(read);
}

std::string Metrics::render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, f] : families_) {
    const char* type = f.type == Type::Counter ? "counter"
                       : f.type == Type::Gauge ? "gauge"
                                               : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, type);
    for (const auto& [labels, c] : f.counters)
      out += fmt::format("{}{} {}\n", name, braces(labels), number(c->value()));
    for (const auto& [labels, g] : f.gauges)
      out += fmt::format("{}{} {}\n", name, braces(labels), number(g()));
    for (const auto& g : f.labeled_gauges) {
      const auto [labels, value] = g();
      out += fmt::format("{}{} {}\n", name, braces(labels), number(value));
    }
    for (const auto& [labels, h] : f.histograms) {
      Histogram::Snapshot s = h->snapshot();
      for (size_t i = 0; i < s.bounds.size(); ++i)
        out += fmt::format("{}_bucket{} {}\n", name,
                           braces(labels, fmt::format("le=\"{}\"", number(s.bounds[i]))),
                           s.cumulative[i]);
      out +=
          fmt::format("{}_bucket{} {}\n", name, braces(labels, "le=\"+Inf\""), s.cumulative.back());
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces(labels), number(s.sum), name,
                         braces(labels), s.count);
    }
  }
  return out;
}

}  // namespace pith::server
