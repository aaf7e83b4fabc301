// pith run -m MODEL PROGRAM.wasm -- ARGS: runs an inferlet in-process against a model — the
// whole serving stack (engine, control layer, runtime) without the HTTP server. Without -m the
// same command runs the program on a pith server (cmd_client.cpp).
#include <fmt/format.h>

#include <memory>

#include "cli/attached_instance.h"
#include "cli/commands.h"
#include "common/byte_size.h"
#include "common/error.h"
#include "stack/serving_stack.h"

namespace pith::cli {

namespace {

struct RunArgs {
  std::string model;
  std::string program;
  std::vector<std::string> args;
  size_t threads = 0;
  std::string kv_memory = "256M";
  uint32_t kv_page_size = 16;
  std::string kv_dtype = "auto";
  std::string cache_dir;
  std::string batch_policy = "adaptive";
  uint32_t max_batch_tokens = 512;
  std::string batch_formation = "decode-first";
  bool no_prefix_cache = false;
  uint32_t max_kv_pages_per_inferlet = 0;
  std::vector<std::string> http_allow;
  bool http_allow_private = false;
  bool no_stdin = false;
  bool verbose = false;
  std::string device = "auto";
  std::string cuda_attention = "auto";
};

int run(const RunArgs& a) {
  ServingOptions so;
  so.model_path = a.model;
  so.quiet_load = !a.verbose;
  so.engine.device = a.device;
  so.engine.n_threads = a.threads;
  so.engine.kv_memory_bytes = parse_byte_size(a.kv_memory);
  so.engine.kv_page_size = a.kv_page_size;
  so.engine.kv_dtype = parse_kv_dtype(a.kv_dtype);
  so.engine.cuda_attention = parse_cuda_attention(a.cuda_attention);
  so.runtime.compiler.cache_dir = a.cache_dir;
  so.control.policy = a.batch_policy;
  so.control.max_batch_tokens = a.max_batch_tokens;
  if (a.batch_formation == "fcfs")
    so.control.batch_formation = BatchFormation::Fcfs;
  else if (a.batch_formation != "decode-first")
    fail("--batch-formation must be decode-first or fcfs, not '{}'", a.batch_formation);
  so.control.prefix_cache = !a.no_prefix_cache;
  so.control.max_kv_pages_per_instance = a.max_kv_pages_per_inferlet;
  so.runtime.http_allow = a.http_allow;
  so.runtime.http_allow_private = a.http_allow_private;
  ServingStack stack(so);
  auto program = stack.runtime().load_program_file(a.program);
  std::vector<std::string> argv = {a.program};
  argv.insert(argv.end(), a.args.begin(), a.args.end());
  return attach(stack.launch(program, argv, terminal_sink()), a.program, a.no_stdin, a.verbose);
}

}  // namespace

void add_run_commands(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* run_cmd = app.add_subcommand("run",
                                     "Run an inferlet on a pith server (pith run PROGRAM.wasm|.cpp "
                                     "-- ARGS), or in-process with -m MODEL");
  run_cmd->add_option("-m,--model", a->model,
                      "model: GGUF file or Hugging Face folder (runs in-process, no server)");
  run_cmd
      ->add_option("program", a->program,
                   "inferlet .wasm file (without -m also a .cpp source, built first)")
      ->required();
  run_cmd->add_option("args", a->args, "arguments passed to the inferlet (after --)");
  run_cmd->add_option("-t,--threads", a->threads, "engine threads (0: one per core)");
  add_device_option(*run_cmd, a->device);
  add_cuda_attention_option(*run_cmd, a->cuda_attention);
  run_cmd->add_option("--kv-memory", a->kv_memory, "KV cache budget, e.g. 256M, 2G");
  run_cmd->add_option("--kv-page-size", a->kv_page_size, "tokens per KV page");
  add_kv_dtype_option(*run_cmd, a->kv_dtype);
  run_cmd->add_option("--cache-dir", a->cache_dir,
                      "native code cache (default ~/.cache/pith/native)");
  run_cmd->add_option("--batch-policy", a->batch_policy, "adaptive | eager | k[:K] | t[:MS]");
  run_cmd->add_option("--max-batch-tokens", a->max_batch_tokens,
                      "token budget per batch (0: unlimited, no chunked prefill)");
  run_cmd->add_option("--batch-formation", a->batch_formation,
                      "decode-first (Sarathi-style) or fcfs");
  run_cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "disable the radix prefix cache");
  run_cmd->add_option("--max-kv-pages-per-inferlet", a->max_kv_pages_per_inferlet,
                      "KV page quota per inferlet (0: none)");
  run_cmd
      ->add_option(
          "--inferlet-http-allow", a->http_allow,
          "hosts inferlets may reach over HTTP: HOST or HOST:PORT, comma-separated (default: none)")
      ->delimiter(',')
      ->allow_extra_args(false);
  run_cmd->add_flag("--inferlet-http-allow-private", a->http_allow_private,
                    "let allowed host names resolve to loopback or private addresses");
  run_cmd->add_flag("--no-stdin", a->no_stdin, "do not forward stdin lines as messages");
  run_cmd->add_flag("-v,--verbose", a->verbose,
                    "model load progress and instance status on stderr");
  RemoteRun remote = add_remote_run_options(*run_cmd);
  run_cmd->get_option("--detach")->excludes("--model");  // detaching needs a server
  run_cmd->callback([a, remote] {
    int code = a->model.empty() ? remote(a->program, a->args, a->no_stdin, a->verbose) : run(*a);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace pith::cli
