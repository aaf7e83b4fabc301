#include "bench/bench_soak.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "bench/inferlet_files.h"
#include "bench/request_driver.h"
#include "bench/soak_target.h"
#include "common/byte_size.h"
#include "common/error.h"
#include "stack/serving_stack.h"

namespace pith::bench {

namespace {

// Least-squares slope of y over x.
double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  if (n < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double d = n * sxx - sx * sx;
  return d == 0 ? 0 : (n * sxy - sx * sy) / d;
}

// The mix on the serving stack of this process.
class InProcessTarget final : public SoakTarget {
 public:
  explicit InProcessTarget(const SoakBenchOptions& o, const std::vector<SoakKind>& kinds)
      : stack_(options(o)) {
    const std::string dir = o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir;
    for (const SoakKind& k : kinds) {
      programs_[k.name] = stack_.runtime().load_program_file(find_inferlet(dir, k.name));
      std::string reason;
      (void)run_one(k, &reason);  // warm: native build, first pages
    }
    description_ = fmt::format("model {}, KV pool {} ({} pages), in process", o.model, o.kv_memory,
                               stack_.controller().gauges().pages_total);
  }

  runtime::ExitStatus::Kind run_one(const SoakKind& k, std::string* reason) override {
    std::vector<std::string> args{k.name};
    args.insert(args.end(), k.args.begin(), k.args.end());
    runtime::ExitStatus st = stack_.launch(programs_.at(k.name), args)->wait();
    *reason = st.reason;
    return st.kind;
  }

  SoakGauges gauges() override {
    const ControllerGauges g = stack_.controller().gauges();
    SoakGauges s;
    s.rss_mib = process_rss_mib();
    s.threads = process_threads();
    s.instances = g.instances;
    s.pages_used = g.pages_total - g.pages_free - g.pages_cached;
    s.pages_total = g.pages_total;
    s.suspended = g.instances_suspended;
    s.suspensions = double(g.suspensions);
    return s;
  }

  std::string describe() const override { return description_; }

 private:
  static ServingOptions options(const SoakBenchOptions& o) {
    ServingOptions so;
    so.model_path = o.model;
    so.quiet_load = true;
    so.engine.device = o.device;
    so.engine.n_threads = static_cast<size_t>(o.threads);
    so.engine.kv_memory_bytes = parse_byte_size(o.kv_memory);
    so.runtime.compiler.cache_dir = o.cache_dir;
    so.runtime.threads = o.runtime_threads;
    so.runtime.limits.cpu_ns = 300'000'000;  // the spinning guest's end
    return so;
  }

  ServingStack stack_;
  std::map<std::string, std::shared_ptr<runtime::Program>> programs_;
  std::string description_;
};

}  // namespace

std::vector<SoakKind> soak_kinds(int openai_share) {
  using K = runtime::ExitStatus::Kind;
  std::vector<SoakKind> k = {
      {"text_completion", {"--prompt", "Once upon a time", "--max-tokens", "48"}, K::Exited, 8},
      {"beam_search",
       {"--prompt", "The answer is", "--beams", "3", "--max-tokens", "16"},
       K::Exited,
       4},
      {"tree_of_thought",
       {"--breadth", "2", "--expand", "2", "--depth", "2", "--thought-tokens", "6",
        "--answer-tokens", "6"},
       K::Exited,
       4},
      {"spin", {}, K::Killed, 2},  // ended by the CPU-time limit
      {"traps", {"oob"}, K::Trapped, 2},
  };
  if (openai_share > 0) {
    int left = std::min(openai_share, 12);
    for (int i = 0; left > 0; i = (i + 1) % 3)
      if (k[i].weight > 1) --k[i].weight, --left;
    k.push_back({"openai_stream", {}, K::Exited, std::min(openai_share, 12)});
  }
  return k;
}

double process_rss_mib(int pid) {
  std::ifstream statm(pid ? fmt::format("/proc/{}/statm", pid) : "/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

int process_threads(int pid) {
  std::ifstream status(pid ? fmt::format("/proc/{}/status", pid) : "/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

nlohmann::json run_soak_bench(const SoakBenchOptions& o) {
  if (o.model.empty()) fail("pith bench soak needs -m MODEL");
  if (o.server) return run_server_soak(o);
  const std::vector<SoakKind> kinds = soak_kinds(0);
  InProcessTarget target(o, kinds);
  return run_soak(target, kinds, o);
}

nlohmann::json run_soak(SoakTarget& target, const std::vector<SoakKind>& kinds,
                        const SoakBenchOptions& o) {
  std::vector<const SoakKind*> cycle;
  for (const SoakKind& k : kinds)
    for (int i = 0; i < k.weight; ++i) cycle.push_back(&k);

  const SoakGauges idle = target.gauges();
  fmt::print("soak: {} at once for {:.0f} s, {}; idle: RSS {:.1f} MiB, {} threads\n", o.instances,
             o.seconds, target.describe(), idle.rss_mib, idle.threads);

  std::mutex mu;
  std::map<std::string, std::map<int, std::vector<double>>> latency;  // kind -> minute -> s
  std::map<std::string, uint64_t> ended, unexpected;
  std::vector<std::string> unexpected_reasons;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> launched{0};
  const auto start = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::thread> slots;
  for (int s = 0; s < o.instances; ++s)
    slots.emplace_back([&, s] {
      for (uint64_t n = s; !stop; n += o.instances) {
        const SoakKind& k = *cycle[n % cycle.size()];
        const double t0 = since();
        ++launched;
        std::string reason;
        bool as_expected = false;
        try {
          as_expected = target.run_one(k, &reason) == k.expected;
        } catch (const std::exception& e) {  // the launch itself failed (HTTP, a lost stream)
          reason = e.what();
        }
        const double t1 = since();
        std::lock_guard lock(mu);
        ++ended[k.name];
        latency[k.name][static_cast<int>(t0 / 60)].push_back(t1 - t0);
        if (!as_expected) {
          ++unexpected[k.name];
          if (unexpected_reasons.size() < 5)
            unexpected_reasons.push_back(fmt::format("{}: {}", k.name, reason));
        }
      }
    });
  std::vector<double> ts, rss;
  nlohmann::json samples = nlohmann::json::array();
  while (since() < o.seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const SoakGauges g = target.gauges();
    ts.push_back(since());
    rss.push_back(g.rss_mib);
    samples.push_back({{"t", ts.back()},
                       {"rss_mib", g.rss_mib},
                       {"threads", g.threads},
                       {"instances", g.instances},
                       {"pages_used", g.pages_used},
                       {"suspended", g.suspended}});
  }
  stop = true;
  for (auto& t : slots) t.join();
  // Idle again: give the runtime a moment to reap, then compare with the idle values.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const SoakGauges end = target.gauges();
  // The slope after the first 20% (allocator pools and caches warming up).
  std::vector<double> tx, ry;
  for (size_t i = ts.size() / 5; i < ts.size(); ++i) {
    tx.push_back(ts[i] / 60);
    ry.push_back(rss[i]);
  }
  const double mib_per_min = slope(tx, ry);

  nlohmann::json out;
  out["suite"] = "soak";
  out["server"] = o.server;
  out["instances"] = o.instances;
  out["seconds"] = o.seconds;
  out["launched"] = launched.load();
  out["rss_idle_mib"] = idle.rss_mib;
  out["rss_end_mib"] = end.rss_mib;
  out["rss_slope_mib_per_min"] = mib_per_min;
  out["pages_leaked"] = end.pages_used;
  out["instances_left"] = end.instances;
  out["threads_idle"] = idle.threads;
  out["threads_end"] = end.threads;
  out["suspensions"] = end.suspensions - idle.suspensions;
  out["samples"] = samples;
  nlohmann::json per_kind = nlohmann::json::object();
  uint64_t bad = 0;
  fmt::print("  {:<16} {:>8} {:>11}  p99 latency per minute (s)\n", "kind", "ended", "unexpected");
  for (const SoakKind& k : kinds) {
    std::vector<double> p99;
    for (auto& [minute, v] : latency[k.name]) p99.push_back(percentile(v, 99));
    bad += unexpected[k.name];
    per_kind[k.name] = {
        {"ended", ended[k.name]}, {"unexpected", unexpected[k.name]}, {"p99_s_per_minute", p99}};
    std::string cols;
    for (double v : p99) cols += fmt::format(" {:6.2f}", v);
    fmt::print("  {:<16} {:>8} {:>11} {}\n", k.name, ended[k.name], unexpected[k.name], cols);
  }
  out["kinds"] = per_kind;
  out["unexpected"] = bad;
  fmt::print(
      "  {} launched; RSS {:.1f} -> {:.1f} MiB, slope {:+.2f} MiB/min after warm-up; KV pages "
      "leaked {}, instances left {}, threads {} -> {}; {} suspensions; {} unexpected endings\n",
      launched.load(), idle.rss_mib, end.rss_mib, mib_per_min, end.pages_used, end.instances,
      idle.threads, end.threads, end.suspensions - idle.suspensions, bad);
  for (const auto& r : unexpected_reasons) fmt::print("    unexpected: {}\n", r);
  return out;
}

}  // namespace pith::bench
