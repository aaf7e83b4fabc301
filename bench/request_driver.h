// A text-completion request driven straight against the control layer from a C++ thread,
// issuing the calls the SDK's Context issues for an inferlet (prefix_match, alloc_pages,
// forward, prefix_insert, then one forward per generated token), with timestamps. The
// serving-technique benchmarks (prefix cache, chunked prefill) use it to isolate the control
// layer's scheduling from the Wasm runtime, whose own cost `pith bench overhead` measures.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "control/controller.h"

namespace pith::bench {

using Clock = std::chrono::steady_clock;

struct RequestTiming {
  Clock::time_point arrival, first_token, done;
  std::vector<Clock::time_point> tokens;  // arrival time of every generated token
  uint32_t prefill_tokens = 0;            // prompt tokens actually computed (after cache hits)
};

struct RequestSpec {
  std::vector<int32_t> prompt;
  int max_tokens = 8;
  bool use_prefix_cache = true;
};

// Runs the request to completion on the calling thread (blocks on each call's completion).
// Throws pith::Error if any call fails.
RequestTiming run_request(Controller& ctl, InstanceId id, const RequestSpec& spec);

double percentile(std::vector<double> v, double p);

}  // namespace pith::bench
