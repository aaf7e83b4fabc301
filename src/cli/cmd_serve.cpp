// pith serve -m MODEL [--host H] [--port P] [--config pith.toml] ...: the HTTP server
// (src/server/api_server.h). Every option can also come from a PITH_* environment variable
// (PITH_PORT, PITH_API_KEY, ...) or a key of the TOML file (port = 8080, api_key = ["k"], ...;
// dashes or underscores). Precedence: flag > environment > file > default.
#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include <memory>

#include "cli/commands.h"
#include "common/error.h"
#include "server/api_server.h"

namespace pith::cli {

namespace {

std::string env_name(const std::string& long_name) {
  std::string e = "PITH_";
  for (char c : long_name)
    e += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return e;
}

std::string toml_scalar(const toml::node& n, const std::string& key, const std::string& file) {
  if (auto s = n.value<std::string>()) return *s;
  if (auto b = n.value_exact<bool>()) return *b ? "true" : "false";
  if (auto i = n.value_exact<int64_t>()) return std::to_string(*i);
  if (auto d = n.value_exact<double>()) return fmt::format("{}", *d);
  fail("{}: '{}' must be a string, number or boolean", file, key);
}

// Applies the TOML file's keys to options that neither a flag nor the environment set.
void apply_toml(CLI::App& cmd, const std::string& file) {
  toml::table table;
  try {
    table = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    fail("{}: {} (line {})", file, std::string(e.description()), e.source().begin.line);
  }
  const toml::table* t = &table;
  if (auto serve = table["serve"].as_table()) t = serve;  // [serve] section or top level
  for (const auto& [k, v] : *t) {
    std::string key(k.str());
    if (v.is_table()) continue;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    CLI::Option* opt = cmd.get_option_no_throw("--" + name);
    if (!opt || name == "config") fail("{}: unknown option '{}'", file, key);
    if (opt->count() > 0) continue;  // a flag or the environment wins
    if (const toml::array* arr = v.as_array()) {
      for (const auto& e : *arr) opt->add_result(toml_scalar(e, key, file));
    } else {
      opt->add_result(toml_scalar(v, key, file));
    }
    opt->run_callback();
  }
}

}  // namespace

void add_serve_commands(CLI::App& app) {
  auto cfg = std::make_shared<server::ServeConfig>();
  auto config_file = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve a model over HTTP: inferlet lifecycle API, OpenAI-compatible endpoints, metrics");
  auto add = [&](CLI::Option* o) {
    // Every long option is also PITH_<NAME> in the environment.
    o->envname(env_name(o->get_single_name()));
    return o;
  };
  add(cmd->add_option("-m,--model", cfg->model, "model: GGUF file or Hugging Face folder"));
  add(cmd->add_option("--host", cfg->host, "listen address"));
  add(cmd->add_option("--port", cfg->port, "listen port (0: any free port)"));
  cmd->add_option("--config", *config_file,
                  "TOML file with any of these options (e.g. port = 8080)")
      ->envname("PITH_CONFIG");
  add(cmd->add_option("--cache-dir", cfg->cache_dir,
                      "uploaded programs and native code (default ~/.cache/pith)"));
  add(cmd->add_option("--native-cache-dir", cfg->native_cache_dir,
                      "compiled native code of programs, shareable between servers (default "
                      "<cache-dir>/native)"));
  add(add_device_option(*cmd, cfg->device));
  add(cmd->add_option("--gpu-memory-fraction", cfg->gpu_memory_fraction,
                      "share of the GPU's memory for weights, KV pool and scratch (0-1]"));
  add(cmd->add_option("--cpu-weight-panels", cfg->cpu_weight_panels,
                      "CPU: repack Q8_0 / Q4_K / BF16 weights at load for the AVX-512 panel "
                      "kernels (faster decode and prefill; false: half their memory)"));
  add(cmd->add_option("--cuda-graphs", cfg->cuda_graphs,
                      "CUDA: replay decode steps as CUDA graphs, one per batch size bucket "
                      "(false: launch every kernel of every step)"));
  add(cmd->add_option("--cuda-gemv", cfg->cuda_gemv,
                      "CUDA: let decode-sized products run the own GEMV (and gate/up projections "
                      "their fused activation) where each measured faster (false: cuBLASLt "
                      "always)"));
  add(add_cuda_attention_option(*cmd, cfg->cuda_attention));
  add(cmd->add_option("-t,--threads", cfg->threads, "engine threads (0: one per core)"));
  add(cmd->add_option("--kv-memory", cfg->kv_memory, "KV cache budget, e.g. 512M, 2G"));
  add(cmd->add_option("--kv-page-size", cfg->kv_page_size, "tokens per KV page"));
  add(add_kv_dtype_option(*cmd, cfg->kv_dtype));
  add(cmd->add_option("--chat-template", cfg->chat_template,
                      "Jinja chat template file (default: the model's)"));
  add(cmd->add_option(
      "--tool-call-parser", cfg->tool_call_parser,
      "tool-call format: auto (from the chat template), hermes, llama3_json, qwen3_coder, "
      "gemma4, mistral, harmony (gpt-oss; also 'openai')"));
  add(cmd->add_option("--reasoning-parser", cfg->reasoning_parser,
                      "how reasoning is told apart: auto (from the chat template), none, "
                      "deepseek_r1, qwen3 (<think> blocks), gemma4 (<|channel>thought blocks), "
                      "mistral ([THINK] blocks), harmony (gpt-oss's analysis channel; also "
                      "'openai_gptoss')"));
  add(cmd->add_option("--pooling", cfg->pooling,
                      "how /v1/embeddings pools the final hidden states: auto (as the model file "
                      "says, else last), last, mean, cls"));
  add(cmd->add_option("--batch-policy", cfg->batch_policy, "adaptive | eager | k[:K] | t[:MS]"));
  add(cmd->add_option("--max-batch-tokens", cfg->max_batch_tokens,
                      "token budget per batch (0: unlimited)"));
  add(cmd->add_option("--batch-formation", cfg->batch_formation, "decode-first or fcfs"));
  add(cmd->add_option("--itl-target-ms", cfg->itl_target_ms,
                      "inter-token latency target: a batch with decode steps holds only the "
                      "tokens that fit it, decodes included, at the measured time per token "
                      "(0: off)")
          ->capture_default_str());
  add(cmd->add_flag("--no-prefix-cache", cfg->no_prefix_cache, "disable the radix prefix cache"));
  add(cmd->add_option("--lora", cfg->lora,
                      "LoRA adapter NAME=PATH (PEFT folder or GGUF adapter), repeatable; requests "
                      "name it as their model"));
  add(cmd->add_option("--max-loras", cfg->max_loras,
                      "LoRA adapters loaded at once (startup and POST /v1/load_lora_adapter)"));
  add(cmd->add_option("--max-kv-pages-per-inferlet", cfg->max_kv_pages_per_inferlet,
                      "KV page quota per inferlet (0: none)"));
  add(cmd->add_option("--state-memory", cfg->state_memory,
                      "hybrid models (Qwen3.5): memory for the recurrent states of sequences "
                      "and prefix-cache checkpoints, e.g. 1G (default: as much as --kv-memory)"));
  add(cmd->add_option("--max-states-per-inferlet", cfg->max_states_per_inferlet,
                      "hybrid models: recurrent-state quota per inferlet (0: none)"));
  add(cmd->add_option("--kv-pressure", cfg->kv_pressure,
                      "when KV pages run short: suspend (wait, swap inferlets to host memory) or "
                      "kill (end the newest inferlet)"));
  add(cmd->add_option("--swap-memory", cfg->swap_memory,
                      "host memory for suspended inferlets' KV pages, e.g. 4G"));
  add(cmd->add_option("--preemption-mode", cfg->preemption_mode,
                      "how a suspended inferlet's KV pages come back: swap (saved to host memory) "
                      "or recompute (pages written from known tokens are dropped and recomputed; "
                      "the rest are swapped)"));
  add(cmd->add_option("--kv-idle-suspend", cfg->kv_idle_suspend_s,
                      "seconds an inferlet with nothing queued may hold KV pages others wait for "
                      "before it is suspended (0: never)"));
  add(cmd->add_option("--runtime-threads", cfg->runtime_threads, "threads running inferlets"));
  add(cmd->add_option("--inferlet-cpu-limit", cfg->inferlet_cpu_limit_s,
                      "CPU seconds per inferlet instance (0: none)"));
  add(cmd->add_option("--inferlet-memory-mb", cfg->inferlet_memory_mb,
                      "linear memory cap per inferlet, MiB"));
  add(cmd->add_option("--inferlet-http-allow", cfg->inferlet_http_allow,
                      "hosts inferlets may call (host or host:port)")
          ->delimiter(','));
  add(cmd->add_option("--inferlet-max-message-bytes", cfg->inferlet_max_message_bytes,
                      "largest message to or from an inferlet (client messages, pub/sub)"));
  add(cmd->add_option("--inferlet-max-messages-per-second", cfg->inferlet_max_messages_per_second,
                      "messages one inferlet may send per second: client messages, pub/sub, "
                      "log lines (burst: one second's worth; 0: unlimited)"));
  add(cmd->add_flag("--inferlet-http-allow-private", cfg->inferlet_http_allow_private,
                    "let allowed host names resolve to loopback or private addresses"));
  add(cmd->add_option("--api-key", cfg->api_keys,
                      "accepted API key (repeatable); without keys no auth")
          ->delimiter(','));
  add(cmd->add_option("--api-keys-file", cfg->api_keys_file, "file with one API key per line"));
  add(cmd->add_option("--max-upload-bytes", cfg->max_upload_bytes, "largest program upload"));
  add(cmd->add_option("--max-body-bytes", cfg->max_body_bytes,
                      "largest request body other than uploads"));
  add(cmd->add_option("--http-idle-timeout", cfg->http_idle_timeout_s,
                      "seconds a connection may stay silent (slow headers included)"));
  add(cmd->add_option("--max-instances", cfg->max_instances,
                      "instances running at once (all clients)"));
  add(cmd->add_option("--max-instances-per-key", cfg->max_instances_per_key,
                      "instances running at once per API key (0: no per-key limit)"));
  add(cmd->add_option("--event-buffer", cfg->event_buffer,
                      "events kept per instance for (re)connecting streams"));
  add(cmd->add_option("--orphan-grace", cfg->orphan_grace_s,
                      "seconds a non-detached instance survives without an event stream"));
  add(cmd->add_option("--drain-timeout", cfg->drain_timeout_s,
                      "on SIGTERM, seconds OpenAI requests in flight may take to finish (lifecycle "
                      "instances end at once; a second signal ends everything)"));
  add(cmd->add_option("--log-interval", cfg->log_interval_s,
                      "seconds between stats lines (0: off)"));
  add(cmd->add_option(
      "--replica-id", cfg->replica_id,
      "this replica's name behind a router: instance ids become NAME-RUN-N so a "
      "proxy can send each instance's calls to its replica (letters, digits, _, -)"));
  add(cmd->add_option("--state-store", cfg->state_store,
                      "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]: the inferlet key-value store, "
                      "broadcast/subscribe and uploaded programs, shared by the replicas"));
  add(cmd->add_flag("-v,--verbose", *verbose, "debug logging"));
  cmd->callback([cmd, cfg, config_file, verbose] {
    if (!config_file->empty()) apply_toml(*cmd, *config_file);
    if (cfg->model.empty())
      fail("no model: pass -m MODEL (or PITH_MODEL, or model = \"...\" in the config file)");
    // (Logs go to stderr, main.cpp: stdout stays free for whatever supervises the server.)
    if (*verbose) spdlog::set_level(spdlog::level::debug);
    server::ApiServer server(*cfg);  // checks every option before anything listens
    int code = server.run();
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace pith::cli
