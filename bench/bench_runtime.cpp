// The runtime benchmark suites (see bench_runtime.h).
#include "bench/bench_runtime.h"

#include "bench/inferlet_files.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "common/read_file.h"
#include "runtime/runtime.h"

extern char** environ;

namespace pith::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using runtime::InstanceEvent;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 0.5);
}

std::string wasm_path(const RuntimeBenchOptions& o, const std::string& name) {
  return find_inferlet(o.inferlet_dir.empty() ? PITH_BUILD_INFERLET_DIR : o.inferlet_dir, name);
}

size_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

// Signals the first message of each instance.
struct FirstMessage {
  std::mutex mu;
  std::condition_variable cv;
  size_t count = 0;
  Clock::time_point at;
  runtime::EventSink sink() {
    return [this](uint64_t, const InstanceEvent& e) {
      if (e.kind != InstanceEvent::Kind::Message) return;
      std::lock_guard lock(mu);
      if (count++ == 0) at = Clock::now();
      cv.notify_all();
    };
  }
  void wait_for(size_t n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return count >= n; });
  }
};

double spawn_true_ms() {
  auto t0 = Clock::now();
  pid_t pid;
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0)
    fail("posix_spawn /bin/true failed");
  int status = 0;
  waitpid(pid, &status, 0);
  return ms_since(t0);
}

runtime::RuntimeConfig config_for(const RuntimeBenchOptions& o, const std::string& cache) {
  runtime::RuntimeConfig c;
  c.compiler.cache_dir = cache;
  c.threads = o.threads;
  return c;
}

}  // namespace

nlohmann::json run_launch_bench(const RuntimeBenchOptions& o) {
  if (o.reps < 1 || o.launches < 1 || o.instances < 1 || o.cold_reps < 0)
    fail("reps, launches and instances must be >= 1");
  std::string echo_path = wasm_path(o, "echo");
  std::string big_path = wasm_path(o, "big");
  fmt::print(
      "launch bench: {} sequential warm launches x {} reps, {} concurrent instances, "
      "{} cold rep(s), {} scheduler thread(s)\n",
      o.launches, o.reps, o.instances, o.cold_reps, o.threads);

  // ---- warm: the program is compiled and loaded once; each launch instantiates it ----
  runtime::Runtime rt(config_for(o, o.cache_dir));
  auto t_load = Clock::now();
  auto echo = rt.load_program_file(echo_path);
  echo->native();
  double first_load_ms = ms_since(t_load);
  std::vector<double> rep_p50, rep_p99, rep_first_p50;
  for (int r = 0; r < o.reps; ++r) {
    std::vector<double> exit_ms, first_ms;
    exit_ms.reserve(o.launches);
    for (int i = 0; i < o.launches; ++i) {
      FirstMessage first;
      auto t0 = Clock::now();
      auto inst = rt.launch(echo, {"echo", "--no-wait"}, first.sink());
      inst->wait();
      exit_ms.push_back(ms_since(t0));
      first_ms.push_back(std::chrono::duration<double, std::milli>(first.at - t0).count());
    }
    rep_p50.push_back(percentile(exit_ms, 0.5));
    rep_p99.push_back(percentile(exit_ms, 0.99));
    rep_first_p50.push_back(percentile(first_ms, 0.5));
  }
  double warm_p50 = median(rep_p50), warm_p99 = median(rep_p99);
  double first_p50 = median(rep_first_p50);
  fmt::print("  warm launch -> exit          p50 {:.3f} ms  p99 {:.3f} ms\n", warm_p50, warm_p99);
  fmt::print("  warm launch -> first message p50 {:.3f} ms\n", first_p50);

  // ---- concurrent idle instances ----
  std::vector<double> rss_per, start_all_ms;
  size_t reached = 0;
  for (int r = 0; r < std::min(o.reps, 3); ++r) {
    size_t rss0 = rss_kib();
    FirstMessage ready;
    std::vector<std::shared_ptr<runtime::Instance>> live;
    auto t0 = Clock::now();
    for (int i = 0; i < o.instances; ++i) live.push_back(rt.launch(echo, {"echo"}, ready.sink()));
    ready.wait_for(static_cast<size_t>(o.instances));
    start_all_ms.push_back(ms_since(t0));
    reached = rt.live_instances();
    rss_per.push_back(double(rss_kib() - rss0) / o.instances);
    for (auto& inst : live) inst->push_message("quit");
    for (auto& inst : live) inst->wait();
  }
  fmt::print("  {} concurrent idle instances: started in {:.1f} ms, {:.1f} KiB resident each\n",
             reached, median(start_all_ms), median(rss_per));

  // ---- cold: a module never seen before (fresh cache), load + launch -> first message ----
  std::string big = read_file(big_path);
  std::vector<double> cold, cold_load;
  for (int r = 0; r < o.cold_reps; ++r) {
    std::string dir = (fs::temp_directory_path() / "pith-bench-cold-XXXXXX").string();
    if (!mkdtemp(dir.data())) fail("cannot create a temporary cache directory");
    {
      runtime::Runtime cold_rt(config_for(o, dir));
      FirstMessage ready;
      auto t0 = Clock::now();
      auto prog = cold_rt.load_program(big);
      cold_load.push_back(ms_since(t0));
      auto inst = cold_rt.launch(prog, {"big", "a", "b", "a"}, ready.sink());
      ready.wait_for(1);
      cold.push_back(std::chrono::duration<double, std::milli>(ready.at - t0).count());
      inst->wait();
    }
    fs::remove_all(dir);
  }
  double cold_ms = cold.empty() ? 0 : median(cold);
  double cold_load_ms = cold_load.empty() ? 0 : median(cold_load);
  fmt::print(
      "  cold launch ({} KB module, empty cache) -> first message {:.1f} ms (upload: "
      "hash + validate + start the native build {:.1f} ms)\n",
      big.size() / 1000, cold_ms, cold_load_ms);

  // ---- baseline: a process per request ----
  std::vector<double> spawn;
  for (int i = 0; i < 200; ++i) spawn.push_back(spawn_true_ms());
  double spawn_p50 = median(spawn);
  fmt::print(
      "  baseline posix_spawn(/bin/true) + wait p50 {:.3f} ms; warm launch is {:.2f}x "
      "that\n",
      spawn_p50, warm_p50 / spawn_p50);

  return {{"suite", "launch"},
          {"warm_p50_ms", warm_p50},
          {"warm_p99_ms", warm_p99},
          {"warm_first_message_p50_ms", first_p50},
          {"first_load_ms", first_load_ms},
          {"cold_ms", cold_ms},
          {"cold_load_ms", cold_load_ms},
          {"cold_module_bytes", big.size()},
          {"instances", reached},
          {"instances_start_ms", median(start_all_ms)},
          {"rss_per_instance_kib", median(rss_per)},
          {"baseline_spawn_p50_ms", spawn_p50},
          {"ratio_warm_vs_spawn", warm_p50 / spawn_p50},
          {"threads", o.threads},
          {"reps", o.reps}};
}

nlohmann::json run_calls_bench(const RuntimeBenchOptions& o) {
  if (o.reps < 1 || o.calls < 1) fail("reps and calls must be >= 1");
  runtime::Runtime rt(config_for(o, o.cache_dir));
  auto prog = rt.load_program_file(wasm_path(o, "calls"));
  prog->native();
  fmt::print("calls bench: {} host calls x {} reps (pith_future_poll from guest code)\n", o.calls,
             o.reps);
  std::vector<double> host, guest;
  for (int r = 0; r < o.reps; ++r) {
    std::mutex mu;
    std::string msg;
    auto inst =
        rt.launch(prog, {"calls", std::to_string(o.calls)}, [&](uint64_t, const InstanceEvent& e) {
          if (e.kind != InstanceEvent::Kind::Message) return;
          std::lock_guard lock(mu);
          msg = e.text;
        });
    auto st = inst->wait();
    if (st.kind != runtime::ExitStatus::Kind::Exited) fail("calls inferlet: {}", st.reason);
    std::lock_guard lock(mu);
    double h = 0, g = 0;
    if (std::sscanf(msg.c_str(), "host_call_ns=%lf guest_call_ns=%lf", &h, &g) != 2)
      fail("calls inferlet sent '{}'", msg);
    host.push_back(h);
    guest.push_back(g);
  }
  double h = median(host), g = median(guest);
  fmt::print("  host call {:.2f} ns, guest indirect call {:.2f} ns (ratio {:.1f}x)\n", h, g, h / g);
  return {{"suite", "calls"},   {"host_call_ns", h},
          {"guest_call_ns", g}, {"ratio_vs_guest_call", h / g},
          {"calls", o.calls},   {"reps", o.reps}};
}

}  // namespace pith::bench
