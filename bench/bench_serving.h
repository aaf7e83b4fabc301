// `pith bench prefix-cache` and `pith bench chunked-prefill`: the production serving
// techniques of the control layer, each measured on and off in the same run (docs/control.md).
//
// prefix-cache: `requests` requests share a `system_tokens` system prompt and differ in a
//   `question_tokens` question; `concurrency` of them are in flight at a time. Reports the
//   prompt tokens actually computed and the end-to-end time, cache on vs off.
// chunked-prefill: one `long_tokens` prompt arrives, then `short_requests` prompts of
//   `short_tokens`, while `decoders` requests are generating. Reports the short requests'
//   time to first token (p50/p99), the decoders' inter-token latency while the long prompt is
//   prefilled (p50/p99) and total throughput, with a token budget (chunking) vs without.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct PrefixCacheBenchOptions {
  std::string model;
  int requests = 64;
  int system_tokens = 1000;
  int question_tokens = 50;
  int max_tokens = 4;
  int concurrency = 4;
  int threads = 2;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
};

struct ChunkedPrefillBenchOptions {
  std::string model;
  int long_tokens = 4000;
  int short_requests = 16;
  int short_tokens = 50;
  int decoders = 4;
  int decode_tokens = 32;
  int short_max_tokens = 4;
  uint32_t budget = 512;  // --max-batch-tokens of the "on" configuration
  int threads = 2;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (engine/backend.h)
};

nlohmann::json run_prefix_cache_bench(const PrefixCacheBenchOptions& options);
nlohmann::json run_chunked_prefill_bench(const ChunkedPrefillBenchOptions& options);

}  // namespace pith::bench
