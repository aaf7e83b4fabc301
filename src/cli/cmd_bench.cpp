// pith bench SUITE: performance suites (implementations in bench/). Each prints a readable
// report; with --json the last line of stdout is one JSON object with the numbers.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_matmul.h"
#include "cli/commands.h"
#include "common/error.h"

namespace pith::cli {

namespace {

std::vector<DType> parse_dtypes(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const auto& n : names) {
    auto d = dtype_from_name(n);
    if (!d) fail("unknown dtype '{}' (expected f32, f16, bf16, q8_0 or q4_0)", n);
    out.push_back(*d);
  }
  return out;
}

KernelIsa parse_isa(const std::string& name) {
  if (name.empty()) return best_isa();
  auto isa = isa_from_name(name);
  if (!isa) fail("unknown kernel isa '{}' (expected scalar, avx2 or avx512)", name);
  if (!isa_supported(*isa)) fail("kernel isa '{}' is not supported by this CPU", name);
  return *isa;
}

struct MatmulArgs {
  std::vector<std::string> dtypes{"f32", "f16", "bf16", "q8_0", "q4_0"};
  std::vector<size_t> tokens{1, 512};
  size_t threads = 2;
  int reps = 5;
  std::string isa;
  bool json = false;
};

void add_matmul_suite(CLI::App& bench) {
  auto args = std::make_shared<MatmulArgs>();
  auto* cmd = bench.add_subcommand("matmul", "matmul kernels on Llama 3.2 1B shapes (random weights)");
  cmd->add_option("--dtype", args->dtypes, "weight dtypes")->delimiter(',');
  cmd->add_option("--tokens", args->tokens, "token counts (1 = decode, 512 = prefill)")->delimiter(',');
  cmd->add_option("-t,--threads", args->threads, "threads (including the caller)");
  cmd->add_option("--reps", args->reps, "timed runs per case (the median is reported)");
  cmd->add_option("--isa", args->isa, "force a kernel level: scalar, avx2, avx512");
  cmd->add_flag("--json", args->json, "print a JSON summary as the last line");
  cmd->callback([args] {
    bench::MatmulBenchOptions o;
    o.dtypes = parse_dtypes(args->dtypes);
    o.tokens = args->tokens;
    if (args->threads == 0) fail("--threads must be at least 1");
    if (args->reps < 1) fail("--reps must be at least 1");
    o.threads = args->threads;
    o.reps = args->reps;
    o.isa = parse_isa(args->isa);
    auto j = bench::run_matmul_bench(o);
    if (args->json) fmt::print("{}\n", j.dump());
  });
}

}  // namespace

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Performance benchmarks");
  bench->require_subcommand(1);
  add_matmul_suite(*bench);
}

}  // namespace pith::cli
