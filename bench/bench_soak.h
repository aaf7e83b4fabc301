// `pith bench soak` (a run of minutes, not a test): `instances` inferlets at once for `seconds`,
// each slot relaunching as its instance ends, from a mix of real inferlets — text completion,
// beam search, tree of thought, and the intended failures: a spinning guest ended by its CPU
// limit and a trapping one. Samples RSS, threads, live instances and KV pages every second;
// at the end waits for everything to finish and checks that KV pages, instances and threads are
// back to their idle values. Reports the RSS slope after warm-up (MiB per minute), pages
// leaked, unexpected endings, and per-kind p99 latency per minute. With `server`, the same mix
// (plus OpenAI chat streams) goes over HTTP to a real `pith serve` child process, whose RSS,
// threads and /metrics gauges are sampled.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct SoakBenchOptions {
  std::string model;
  int instances = 64;
  double seconds = 60;
  std::string kv_memory = "64M";  // small enough that KV pressure (suspension) takes part
  int threads = 2;                // engine threads
  int runtime_threads = 1;
  std::string inferlet_dir;  // "" = the build tree
  std::string cache_dir;     // native cache ("" = default)
  std::string device = "auto";
  // --server: run the mix through a `pith serve` child process (this binary) over HTTP, with
  // `openai_share` of every 20 launches being streamed chat completions.
  bool server = false;
  int openai_share = 4;
};

nlohmann::json run_soak_bench(const SoakBenchOptions& options);

}  // namespace pith::bench
