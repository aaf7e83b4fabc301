// `pith bench overhead`: what programmability costs (paper Tables 3 and 4).
//  - control_call_us: a control-layer call (kvpage_alloc / kvpage_dealloc) issued by an
//    inferlet, guest clock, issue to completion.
//  - forward_call_us: with `instances` concurrent text-completion inferlets, the wall time the
//    backend was *not* computing (runtime, control layer, scheduling, batch assembly), divided
//    by the number of forward calls: the per-call overhead outside the model.
//  - tpot_inferlet_ms vs tpot_fused_ms: time per output token of one greedy text-completion
//    inferlet against a fused C++ greedy loop calling the same engine directly (the baseline,
//    measured in the same run); overhead_pct = inferlet / fused - 1.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct OverheadBenchOptions {
  std::string model;
  int instances = 1000;    // concurrent inferlets for forward_call_us
  int decode_tokens = 64;  // tokens per TPOT measurement
  int runs = 3;            // median over runs
  int threads = 2;
  long control_calls = 200000;
  std::string inferlet_dir;
  std::string cache_dir;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
};

nlohmann::json run_overhead_bench(const OverheadBenchOptions& options);

}  // namespace pith::bench
