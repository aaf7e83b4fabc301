#include "bench/transformers_baseline.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>
#include <string_view>

#include "common/atomic_file.h"
#include "common/error.h"
#include "runtime/subprocess.h"

namespace pith::bench {

std::string_view transformers_bench_script();  // bench/transformers_bench.py (EmbedFile.cmake)

namespace fs = std::filesystem;

TransformersResult run_transformers_bench(const TransformersRun& run) {
  // The script in a folder of its own (the tool's working directory), removed afterwards.
  std::string dir = (fs::temp_directory_path() / "pith-transformers-XXXXXX").string();
  if (!mkdtemp(dir.data())) fail("cannot create a temporary folder for the transformers baseline");
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string script = dir + "/transformers_bench.py";
  write_file_atomically(script, transformers_bench_script());

  std::string batch;
  for (size_t b : run.batch_sizes) batch += (batch.empty() ? "" : ",") + std::to_string(b);
  const std::vector<std::string> argv = {run.python,
                                         script,
                                         "--model",
                                         run.model,
                                         "--device",
                                         run.device,
                                         "--threads",
                                         std::to_string(run.threads),
                                         "--n-prompt",
                                         std::to_string(run.n_prompt),
                                         "--n-gen",
                                         std::to_string(run.n_gen),
                                         "--batch=" + batch,
                                         "--batch-steps",
                                         std::to_string(run.batch_steps),
                                         "--reps",
                                         std::to_string(run.reps)};
  // torch reserves far more address space than a compiler (CUDA maps the device's memory) and
  // keeps every core busy: only the wall clock bounds it.
  runtime::ProcessLimits limits;
  limits.cpu_seconds = RLIM_INFINITY;
  limits.address_space = RLIM_INFINITY;
  limits.wall_seconds = 3600;
  const runtime::ProcessResult r = runtime::run_limited(argv, dir, limits);

  // Its output (stderr too: transformers' warnings and progress come first) ends with the JSON.
  std::string out = r.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const size_t line = out.find_last_of('\n');
  nlohmann::json j =
      nlohmann::json::parse(line == std::string::npos ? out : out.substr(line + 1), nullptr, false);
  if (!r.ok() || !j.is_object())
    fail("the transformers baseline failed ({}; {} {}):\n{}", r.describe(), run.python, script,
         r.output);
  TransformersResult t;
  t.pp_tok_s = j.value("pp_tok_s", 0.0);
  t.tg_tok_s = j.value("tg_tok_s", 0.0);
  if (j.contains("batch_tg_tok_s"))
    for (const auto& [b, v] : j["batch_tg_tok_s"].items()) t.batch_tg_tok_s[std::stoul(b)] = v;
  t.report = j;
  return t;
}

nlohmann::json compare_with_transformers(const TransformersRun& run, double pp, double tg,
                                         const nlohmann::json& batch) {
  TransformersResult t;
  try {
    t = run_transformers_bench(run);
  } catch (const Error& e) {
    fmt::print("transformers baseline: {}\n", e.what());
    return {{"transformers_error", e.what()}};
  }
  const nlohmann::json& r = t.report;
  fmt::print("transformers {} (torch {}, {}, {}, {} attention):", r.value("transformers", "?"),
             r.value("torch", "?"), run.device, r.value("dtype", "?"),
             r.value("attn_implementation", "?"));
  if (t.pp_tok_s > 0) fmt::print(" pp{} {:.2f} tok/s", run.n_prompt, t.pp_tok_s);
  if (t.tg_tok_s > 0) fmt::print(", tg{} {:.2f} tok/s", run.n_gen, t.tg_tok_s);
  fmt::print("\npith / transformers:");
  nlohmann::json out = {{"transformers", r},
                        {"pp_vs_transformers", t.pp_tok_s > 0 ? pp / t.pp_tok_s : 0.0},
                        {"tg_vs_transformers", t.tg_tok_s > 0 ? tg / t.tg_tok_s : 0.0},
                        {"batch_vs_transformers", nlohmann::json::object()}};
  if (t.pp_tok_s > 0 && pp > 0) fmt::print(" prefill {:.2f}x", pp / t.pp_tok_s);
  if (t.tg_tok_s > 0 && tg > 0) fmt::print(", decode {:.2f}x", tg / t.tg_tok_s);
  for (const auto& [b, v] : t.batch_tg_tok_s) {
    const std::string key = std::to_string(b);
    if (v <= 0 || !batch.contains(key)) continue;
    const double ratio = batch[key].get<double>() / v;
    out["batch_vs_transformers"][key] = ratio;
    fmt::print(", batch {} {:.2f}x", b, ratio);
  }
  fmt::print("\n");
  return out;
}

}  // namespace pith::bench
