// The `pith` binary's subcommands. Each cmd_*.cpp file registers its subcommands on the root
// app; main.cpp only wires them together and maps errors to exit codes.
#pragma once

#include <CLI/CLI.hpp>

namespace pith::cli {

void add_model_commands(CLI::App& app);  // pith model info|gen
void add_logits_commands(CLI::App& app);  // pith logits
void add_tokenize_commands(CLI::App& app);  // pith tokenize|detokenize
void add_bench_commands(CLI::App& app);  // pith bench matmul|model
void add_inferlet_commands(CLI::App& app);  // pith run-local, pith inferlet build
void add_chat_template_commands(CLI::App& app);  // pith chat-template
void add_run_commands(CLI::App& app);  // pith run -m MODEL (in-process serving stack)

}  // namespace pith::cli
