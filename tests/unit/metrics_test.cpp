// The Prometheus registry: text exposition format, histogram buckets, label sets.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace pith::server {
namespace {

TEST(Metrics, RendersCountersGaugesAndHistograms) {
  Metrics m;
  m.counter("pith_requests_total", "Requests").inc();
  m.counter("pith_requests_total", "Requests").inc(2);
  m.counter("pith_finished_total", "Finished", "kind=\"trapped\"").inc();
  m.gauge("pith_pages", "Pages", [] { return 12.0; }, "state=\"free\"");
  Histogram& h = m.histogram("pith_latency_seconds", "Latency", {0.1, 1});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string t = m.render();
  EXPECT_NE(t.find("# TYPE pith_requests_total counter\npith_requests_total 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_finished_total{kind=\"trapped\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE pith_pages gauge\npith_pages{state=\"free\"} 12\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_sum 5.55\npith_latency_seconds_count 3\n"), std::string::npos) << t;
}

TEST(Metrics, OneNameOneType) {
  Metrics m;
  m.counter("pith_x", "x");
  EXPECT_ANY_THROW(m.gauge("pith_x", "x", [] { return 0.0; }));
}

TEST(Metrics, ExponentialBuckets) {
  EXPECT_EQ(exponential_buckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
}

}  // namespace
}  // namespace pith::server
