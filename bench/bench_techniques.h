// `pith bench techniques`: the paper's Fig. 8 on this machine. Each of the eleven technique
// workloads (text completion, prefix tree, ToT, RoT, GoT, SkoT, modular cache, EBNF decoding,
// speculative decoding, beam search, attention sink) runs as N concurrent instances of its
// inferlet against one model; reported per workload: requests/s, latency p50/p99 (launch to
// exit), forward tokens per request and the mean batch. Baselines in the same run: the text
// completion row (every workload's throughput as a ratio of it), and with `against_device` the
// whole table again on that backend (e.g. the CPU beside a GPU), interleaved per workload.
// `ebnf_masked` runs only when named: the EBNF row with the grammar's mask sent down with each
// step (the server's top-256 of the allowed tokens) instead of the whole vocabulary brought up.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct TechniquesBenchOptions {
  std::string model;
  std::vector<std::string> workloads;  // names (technique_workload_names()); empty: all
  int instances = 8;                   // concurrent instances per workload
  int max_tokens = 16;                 // tokens each instance generates (per branch)
  int runs = 1;                        // the median is reported
  int threads = 2;                     // engine threads (CPU)
  std::string device = "auto";         // cpu | cuda | cuda:N | auto
  std::string against_device;          // "": none; else the same table on this backend too
  std::string inferlet_dir;            // "" = the build tree
  std::string cache_dir;               // native cache ("" = default)
};

std::vector<std::string> technique_workload_names();

nlohmann::json run_techniques_bench(const TechniquesBenchOptions& options);

}  // namespace pith::bench
