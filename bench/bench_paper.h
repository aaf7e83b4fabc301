// `pith bench paper`: the paper's evaluation (§7) in one command on whatever device is present,
// each figure beside the baseline its own suite measures in the same run:
//   Table 4  text-completion inferlet TPOT vs a fused C++ greedy loop   (bench overhead)
//   Table 5  adaptive batching vs eager dispatch                       (bench batching)
//   Fig. 6   ReAct, CodeAct and Swarm agents: the loops in inferlets vs driven over the OpenAI
//            API (bench agents)
//   Fig. 8   the eleven technique workloads, optionally beside another backend (bench techniques)
// Writes OUT/paper.json (every suite's JSON), a chart spec per figure and, where python3 and
// tools/svg_chart.py are there, the SVG charts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct PaperBenchOptions {
  std::string model;
  std::string out_dir = "paper-bench";
  int concurrency = 0;          // Tables 4 and 5: concurrent inferlets (0: 128 on a GPU, else 16)
  int tokens = 32;              // tokens generated per request
  int runs = 3;                 // runs per measurement (medians)
  int threads = 2;              // engine threads (CPU)
  std::string device = "auto";  // cpu | cuda | cuda:N | auto
  std::string against_device;   // Fig. 8 also on this backend ("": not)
  std::string inferlet_dir;     // "" = the build tree
  std::string cache_dir;        // native cache ("" = default)
};

nlohmann::json run_paper_bench(const PaperBenchOptions& options);

}  // namespace pith::bench
