// The Prometheus registry: text exposition format, histogram buckets, label sets; and the
// serving metrics built on it (compile times observed once, the periodic stats line).
#include <gtest/gtest.h>

#include "server/metrics.h"
#include "server/serving_metrics.h"

namespace pith::server {
namespace {

TEST(Metrics, RendersCountersGaugesAndHistograms) {
  Metrics m;
  m.counter("pith_requests_total", "Requests").inc();
  m.counter("pith_requests_total", "Requests").inc(2);
  m.counter("pith_finished_total", "Finished", "kind=\"trapped\"").inc();
  m.gauge(
      "pith_pages", "Pages", [] { return 12.0; }, "state=\"free\"");
  Histogram& h = m.histogram("pith_latency_seconds", "Latency", {0.1, 1});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string t = m.render();
  EXPECT_NE(t.find("# TYPE pith_requests_total counter\npith_requests_total 3\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("pith_finished_total{kind=\"trapped\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE pith_pages gauge\npith_pages{state=\"free\"} 12\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("pith_latency_seconds_sum 5.55\npith_latency_seconds_count 3\n"),
            std::string::npos)
      << t;
}

TEST(Metrics, OneNameOneType) {
  Metrics m;
  m.counter("pith_x", "x");
  EXPECT_ANY_THROW(m.gauge("pith_x", "x", [] { return 0.0; }));
}

TEST(Metrics, ExponentialBuckets) {
  EXPECT_EQ(exponential_buckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
}

TEST(ServingMetrics, StatsLineRatesAreDeltasOverTheInterval) {
  ControllerGauges last{}, now{};
  last.prefill_tokens = 100;
  now.prefill_tokens = 300;  // 200 in 2 s
  last.decode_tokens = 10;
  now.decode_tokens = 30;  // 20 in 2 s
  now.pages_total = 8;
  now.pages_free = 6;  // 25 % used
  now.queue_depth = 3;
  last.prefix_hit_tokens = 5;
  now.prefix_hit_tokens = 8;   // 3 hits
  now.prefix_miss_tokens = 1;  // 1 miss: 75 %
  EXPECT_EQ(stats_line(last, now, 2.0, 4),
            "prompt 100.0 tok/s, generation 10.0 tok/s, running 4 inferlets, queued 3 calls, KV "
            "usage 25.0%, "
            "prefix-cache hit 75.0%");
  EXPECT_NE(stats_line(now, now, 1.0, 0).find("KV usage 25.0%, prefix-cache hit 0.0%"),
            std::string::npos);
}

TEST(ServingMetrics, CompileTimeIsObservedOncePerProgram) {
  Metrics m;
  CompileTimes times(m);
  ProgramInfo ready, pending;
  ready.hash = std::string(64, 'a');
  ready.native_ready = true;
  ready.compile_seconds = 0.2;
  pending.hash = std::string(64, 'b');
  times.observe({ready, pending});
  times.observe({ready, pending});
  std::string t = m.render();
  EXPECT_NE(t.find("pith_program_compile_seconds_count 1\n"), std::string::npos) << t;
  pending.native_ready = true;
  pending.compile_seconds = 1;
  times.observe({ready, pending});
  EXPECT_NE(m.render().find("pith_program_compile_seconds_count 2\n"), std::string::npos);
}

}  // namespace
}  // namespace pith::server
