// `pith bench launch` and `pith bench calls`: the inferlet runtime's numbers (docs/runtime.md).
//
// launch: warm launch latency (program already compiled: launch -> first guest message and
//   launch -> exit, p50/p99 over many sequential launches, median over runs), cold launch (a
//   ~150 KB module never seen before, fresh native cache: load + launch -> first guest message),
//   and N concurrent idle instances (all parked in receive) with resident memory per instance.
//   Baseline in the same run: posix_spawn + wait of /bin/true (a process per request).
// calls: cost of a non-model host call made from guest code (pith_future_poll), against an
//   indirect call to a guest function in the same loop (the baseline).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct RuntimeBenchOptions {
  std::string inferlet_dir;  // folder with echo.wasm, big.wasm, calls.wasm ("" = build tree)
  std::string cache_dir;     // native cache for warm runs ("" = default)
  int reps = 5;
  int launches = 2000;   // sequential warm launches per rep
  int instances = 1000;  // concurrent idle instances
  int cold_reps = 3;     // each cold rep also builds the big module natively (seconds)
  int threads = 2;       // scheduler threads
  long calls = 2000000;  // host calls per rep
};

nlohmann::json run_launch_bench(const RuntimeBenchOptions& options);
nlohmann::json run_calls_bench(const RuntimeBenchOptions& options);

}  // namespace pith::bench
