// The `pith` binary's subcommands. Each cmd_*.cpp file registers its subcommands on the root
// app; main.cpp only wires them together and maps errors to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace pith::cli {

void add_model_commands(CLI::App& app);          // pith model info|gen
void add_logits_commands(CLI::App& app);         // pith logits
void add_tokenize_commands(CLI::App& app);       // pith tokenize|detokenize
void add_bench_commands(CLI::App& app);          // pith bench matmul|model
void add_inferlet_commands(CLI::App& app);       // pith run-local, pith inferlet build|new
void add_chat_template_commands(CLI::App& app);  // pith chat-template
void add_run_commands(CLI::App& app);            // pith run -m MODEL (in-process serving stack)
void add_serve_commands(CLI::App& app);          // pith serve (HTTP server)
void add_client_commands(
    CLI::App& app);  // pith ps|kill|programs|complete (a pith server's HTTP API)

// `pith run` without -m (cmd_client.cpp): registers --server, --api-key and --detach on the run
// subcommand and returns what runs PROGRAM on the server; the result is the exit code.
using RemoteRun = std::function<int(
    const std::string& program, const std::vector<std::string>& args, bool no_stdin, bool verbose)>;
RemoteRun add_remote_run_options(CLI::App& run_cmd);

// `--device cpu|cuda|cuda:N|auto` on every command that runs the model (engine/backend.h).
inline CLI::Option* add_device_option(CLI::App& cmd, std::string& device) {
  return cmd
      .add_option("--device", device, "cpu, cuda, cuda:N or auto (cuda when a GPU is present)")
      ->default_val("auto");
}

// `--cuda-attention auto|flashinfer|pith` (BackendOptions::cuda_attention), its default from
// PITH_CUDA_ATTENTION (as vLLM's attention-backend variable: one setting for every server and
// tool a test or benchmark starts); parsed with parse_cuda_attention where options are resolved.
inline CLI::Option* add_cuda_attention_option(CLI::App& cmd, std::string& choice) {
  return cmd
      .add_option("--cuda-attention", choice,
                  "CUDA: the paged-attention kernel: auto (FlashInfer where built and the "
                  "model fits it, else the own kernel), flashinfer (an error where it cannot "
                  "run), pith (the own kernel everywhere)")
      ->envname("PITH_CUDA_ATTENTION")
      ->default_val("auto");
}

// `--kv-dtype auto|f32|f16|bf16` beside --kv-memory (backend/kv_dtype.h); parsed with
// parse_kv_dtype where the options are resolved.
inline CLI::Option* add_kv_dtype_option(CLI::App& cmd, std::string& kv_dtype) {
  return cmd
      .add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: f16 or bf16 hold twice the tokens of f32 and halve "
                  "attention's reads; auto: f16 on the CPU (f32 for pith logits), the activation "
                  "type on a GPU")
      ->default_val("auto");
}

}  // namespace pith::cli
