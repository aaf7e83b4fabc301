// The soak's moving parts (bench_soak.h): the mix each slot relaunches from, and the target the
// mix runs on — the serving stack in this process (bench_soak.cpp) or a `pith serve` child
// process driven over HTTP with OpenAI streams mixed in (soak_server.cpp). run_soak() drives
// either and reports the same figures.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_soak.h"
#include "runtime/instance.h"

namespace pith::bench {

struct SoakKind {
  std::string name;  // an inferlet, or "openai_stream" (a streamed chat completion)
  std::vector<std::string> args;
  runtime::ExitStatus::Kind expected;
  int weight;  // launches in a cycle of 20
};

// text completion 8, beam search 4, tree of thought 4, a spinner ended by its CPU limit 2, a
// trapping guest 2; `openai_share` (0-12) of the 20 become streamed chat completions, taken
// from the first three in turn.
std::vector<SoakKind> soak_kinds(int openai_share);

struct SoakGauges {
  double rss_mib = 0;
  int threads = 0;
  double instances = 0, pages_used = 0, pages_total = 0, suspended = 0, suspensions = 0;
};

class SoakTarget {
 public:
  virtual ~SoakTarget() = default;
  // Runs one launch of `kind` to its end (blocking; many threads at once). Returns how it ended
  // and, in `reason`, why; throws pith::Error when the launch could not be followed to an end.
  virtual runtime::ExitStatus::Kind run_one(const SoakKind& kind, std::string* reason) = 0;
  virtual SoakGauges gauges() = 0;
  virtual std::string describe() const = 0;  // for the report's first line
};

nlohmann::json run_soak(SoakTarget& target, const std::vector<SoakKind>& kinds,
                        const SoakBenchOptions& options);

// The server mode of the soak (soak_server.cpp).
nlohmann::json run_server_soak(const SoakBenchOptions& options);

// RSS (MiB) and thread count of a process (/proc/PID; 0: this one).
double process_rss_mib(int pid = 0);
int process_threads(int pid = 0);

}  // namespace pith::bench
