#include "bench/bench_paper.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/backend.h"
#include "bench/bench_agents.h"
#include "bench/bench_batching.h"
#include "bench/bench_overhead.h"
#include "bench/bench_techniques.h"
#include "common/error.h"

namespace pith::bench {

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) fail("pith bench paper: cannot write {}", path.string());
}

// SPEC -> SVG with the project's dependency-free chart tool, when python3 and the tool exist.
bool render(const fs::path& spec, const fs::path& svg) {
  const fs::path tool = fs::path(PITH_SOURCE_DIR) / "tools" / "svg_chart.py";
  if (!fs::exists(tool)) return false;
  const std::string cmd =
      fmt::format("python3 '{}' '{}' '{}' 2>/dev/null", tool.string(), spec.string(), svg.string());
  return std::system(cmd.c_str()) == 0;
}

nlohmann::json bar(std::string title, std::string ylabel, nlohmann::json categories,
                   nlohmann::json series) {
  return {{"type", "bar"},
          {"title", std::move(title)},
          {"ylabel", std::move(ylabel)},
          {"categories", std::move(categories)},
          {"series", std::move(series)}};
}

}  // namespace

nlohmann::json run_paper_bench(const PaperBenchOptions& o) {
  if (o.model.empty()) fail("pith bench paper needs -m MODEL");
  if (o.concurrency < 0 || o.tokens < 2 || o.runs < 1)
    fail(
        "pith bench paper: --concurrency must be >= 0 (0: the device's default), --tokens >= 2 "
        "and --runs >= 1");
  const bool gpu = device_is_cuda(o.device);
  const int n = o.concurrency > 0 ? o.concurrency : (gpu ? 128 : 16);
  fs::create_directories(o.out_dir);
  fmt::print("paper: model {}, device {}{}, {} concurrent requests, {} tokens each -> {}\n",
             o.model, o.device, gpu ? " (a GPU)" : "", n, o.tokens, o.out_dir);

  nlohmann::json out;
  out["suite"] = "paper";
  out["model"] = o.model;
  out["device"] = o.device;
  out["concurrency"] = n;

  fmt::print("\n== Table 4: inferlet vs fused greedy loop (TPOT) ==\n");
  OverheadBenchOptions ov;
  ov.model = o.model;
  ov.instances = n;
  ov.decode_tokens = o.tokens;
  ov.runs = o.runs;
  ov.threads = o.threads;
  ov.device = o.device;
  ov.inferlet_dir = o.inferlet_dir;
  ov.cache_dir = o.cache_dir;
  out["table4_overhead"] = run_overhead_bench(ov);

  fmt::print("\n== Table 5: adaptive batching vs eager ==\n");
  BatchingBenchOptions ba;
  ba.model = o.model;
  ba.policies = {"adaptive"};
  ba.instances = n;
  ba.max_tokens = o.tokens;
  ba.runs = o.runs;
  ba.threads = o.threads;
  ba.device = o.device;
  ba.inferlet_dir = o.inferlet_dir;
  ba.cache_dir = o.cache_dir;
  out["table5_batching"] = run_batching_bench(ba);

  fmt::print("\n== Fig. 8: technique workloads ==\n");
  TechniquesBenchOptions te;
  te.model = o.model;
  te.instances = std::max(1, n / 4);  // each reasoning workload runs several sequences
  te.max_tokens = std::max(4, o.tokens / 2);
  te.runs = o.runs;
  te.threads = o.threads;
  te.device = o.device;
  te.against_device = o.against_device;
  te.inferlet_dir = o.inferlet_dir;
  te.cache_dir = o.cache_dir;
  out["fig8_techniques"] = run_techniques_bench(te);

  fmt::print(
      "\n== Fig. 6: ReAct, CodeAct and Swarm agents, the loop in inferlets vs over the OpenAI API "
      "==\n");
  AgentsBenchOptions ag;
  ag.model = o.model;
  ag.agents = std::max(1, n / 4);
  ag.calls = 8;
  ag.step_tokens = std::max(2, o.tokens / 8);
  ag.runs = o.runs;
  ag.threads = o.threads;
  ag.device = o.device;
  ag.inferlet_dir = o.inferlet_dir;
  ag.cache_dir = o.cache_dir;
  out["fig6_agents"] = run_agents_bench(ag);

  // Charts: one spec per figure, rendered where the tool runs.
  const fs::path dir(o.out_dir);
  const auto& t4 = out["table4_overhead"];
  const auto& t5 = out["table5_batching"]["per_policy"];
  const auto& f8 = out["fig8_techniques"]["workloads"];
  const auto& f6 = out["fig6_agents"];
  nlohmann::json names = nlohmann::json::array(), rps = nlohmann::json::array(),
                 there = nlohmann::json::array();
  for (const auto& w : f8) {
    names.push_back(w["workload"]);
    rps.push_back(w["req_per_s"]);
    if (w.contains("against")) there.push_back(w["against"]["req_per_s"]);
  }
  nlohmann::json f6_names = nlohmann::json::array(), f6_inferlet = nlohmann::json::array(),
                 f6_client = nlohmann::json::array();
  for (const auto& w : f6["workloads"]) {
    f6_names.push_back(w["workload"]);
    f6_inferlet.push_back(w["inferlet"]["tasks_per_s"]);
    f6_client.push_back(w["client"]["tasks_per_s"]);
  }
  nlohmann::json f8_series = nlohmann::json::array({{{"name", o.device}, {"values", rps}}});
  if (!there.empty()) f8_series.push_back({{"name", o.against_device}, {"values", there}});
  const std::vector<std::pair<std::string, nlohmann::json>> charts{
      {"table4_tpot",
       bar(fmt::format("TPOT at {} concurrent: inferlet vs fused loop", n), "ms",
           {"inferlet (greedy_abi)", "fused C++ loop"},
           nlohmann::json::array(
               {{{"name", "TPOT"}, {"values", {t4["tpot_inferlet_ms"], t4["tpot_fused_ms"]}}}}))},
      {"table5_batching",
       bar(fmt::format("{} concurrent text completions", n), "requests/s", {"eager", "adaptive"},
           nlohmann::json::array(
               {{{"name", "req/s"},
                 {"values", {t5["eager"]["req_per_s"], t5["adaptive"]["req_per_s"]}}}}))},
      {"fig6_agents",
       bar(fmt::format("agents ({} concurrent tasks each)", ag.agents), "tasks/s", f6_names,
           nlohmann::json::array(
               {{{"name", "inferlet"}, {"values", f6_inferlet}},
                {{"name", "client loop over the OpenAI API"}, {"values", f6_client}}}))},
      {"fig8_techniques", bar(fmt::format("technique workloads, {} concurrent each", te.instances),
                              "requests/s", names, f8_series)}};
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [name, spec] : charts) {
    const fs::path spec_path = dir / (name + ".chart.json"), svg = dir / (name + ".svg");
    write_file(spec_path, spec.dump(2));
    files.push_back(spec_path.string());
    if (render(spec_path, svg)) files.push_back(svg.string());
  }
  out["files"] = files;
  write_file(dir / "paper.json", out.dump(2));
  fmt::print("\npaper: wrote {} and {}\n", (dir / "paper.json").string(),
             fmt::join(files.begin(), files.end(), ", "));
  return out;
}

}  // namespace pith::bench
