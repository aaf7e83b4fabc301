// pith: a programmable LLM serving system. Entry point of the single `pith` binary.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "cli/commands.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"pith: a programmable LLM serving system (inferlets in WebAssembly)", "pith"};
  app.require_subcommand(1);
  app.set_version_flag("--version", PITH_VERSION);
  // Logs go to stderr: stdout is the commands' output (--json objects, tables, generated text),
  // which a backend's start-up lines (the CUDA backend logs its device and memory) would break.
  spdlog::set_default_logger(spdlog::stderr_color_mt("pith"));
  spdlog::set_pattern("%^%L%$ %H:%M:%S.%e %v");

  pith::cli::add_model_commands(app);
  pith::cli::add_logits_commands(app);
  pith::cli::add_tokenize_commands(app);
  pith::cli::add_bench_commands(app);
  pith::cli::add_inferlet_commands(app);
  pith::cli::add_chat_template_commands(app);
  pith::cli::add_run_commands(app);
  pith::cli::add_client_commands(app);
  pith::cli::add_serve_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pith::Error& e) {
    std::fprintf(stderr, "pith: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pith: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
