#include "server/serve_settings.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "backend/backend.h"
#include "common/byte_size.h"
#include "common/cache_dir.h"
#include "common/error.h"
#include "control/adapter_registry.h"
#include "control/dispatch_policy.h"
#include "runtime/redis_client.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace pith::server {

namespace {

std::string trimmed(const std::string& line) {
  auto b = line.find_first_not_of(" \t\r");
  auto e = line.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
}

std::set<std::string> read_api_keys(const ServeConfig& c) {
  std::set<std::string> keys;
  for (const auto& k : c.api_keys)
    if (!k.empty()) keys.insert(k);
  if (c.api_keys_file.empty()) return keys;
  std::ifstream in(c.api_keys_file);
  if (!in) fail("cannot read API keys file {}", c.api_keys_file);
  std::string line;
  while (std::getline(in, line)) {
    std::string key = trimmed(line);
    if (key.empty() || key[0] == '#') continue;
    keys.insert(key);
  }
  if (keys.empty()) fail("API keys file {} holds no key", c.api_keys_file);
  return keys;
}

size_t byte_size_option(const char* option, const std::string& text) {
  try {
    return parse_byte_size(text);
  } catch (const Error& e) {
    fail("{}: {}", option, e.what());
  }
}

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail("{} {}", option, why);
}

// A finite number of seconds >= 0 (0 switches the feature off where the option says so).
void seconds_option(const char* option, double v) {
  require(std::isfinite(v) && v >= 0, option,
          fmt::format("must be a number of seconds >= 0, not {}", v));
}

}  // namespace

void check_device(const std::string& device) {
  if (device.empty()) fail("--device must name a device: auto, cpu, cuda or cuda:N");
  bool cuda = false;
  try {
    cuda = device_is_cuda(device);  // the backend factory's own parser
  } catch (const Error& e) {
    fail("--device: {}", e.what());
  }
  // Which GPU index exists is the backend's to say; that there is none at all is known now.
  if (cuda && device != "auto" && !device_is_cuda("auto"))
    fail(
        "--device {}: no CUDA device is available (none on this machine, or pith was built without "
        "CUDA)",
        device);
}

ServeSettings resolve_serve_config(ServeConfig c) {
  ServeSettings s;
  if (c.model.empty())
    fail("no model: pass -m MODEL (or PITH_MODEL, or model = \"...\" in the config file)");
  if (c.cache_dir.empty()) c.cache_dir = default_cache_root();

  // Inference layer.
  check_device(c.device);
  require(std::isfinite(c.gpu_memory_fraction) && c.gpu_memory_fraction > 0 &&
              c.gpu_memory_fraction <= 1,
          "--gpu-memory-fraction", fmt::format("must be in (0, 1], not {}", c.gpu_memory_fraction));
  require(c.kv_page_size > 0, "--kv-page-size", "must be at least 1 token");
  const size_t kv_bytes = byte_size_option("--kv-memory", c.kv_memory);
  require(kv_bytes > 0, "--kv-memory", "must be more than 0 bytes");
  const KvDType kv_dtype = parse_kv_dtype(c.kv_dtype);
  const CudaAttention cuda_attention = parse_cuda_attention(c.cuda_attention);
  const size_t state_bytes =
      c.state_memory.empty() ? 0 : byte_size_option("--state-memory", c.state_memory);
  require(c.state_memory.empty() || state_bytes > 0, "--state-memory", "must be more than 0 bytes");

  // Control layer.
  try {
    make_dispatch_policy(c.batch_policy);
  } catch (const Error& e) {
    fail("--batch-policy: {}", e.what());
  }
  require(c.kv_pressure == "suspend" || c.kv_pressure == "kill", "--kv-pressure",
          fmt::format("must be suspend or kill, not '{}'", c.kv_pressure));
  const size_t swap_bytes = byte_size_option("--swap-memory", c.swap_memory);
  require(c.preemption_mode == "swap" || c.preemption_mode == "recompute", "--preemption-mode",
          fmt::format("must be swap or recompute, not '{}'", c.preemption_mode));
  seconds_option("--kv-idle-suspend", c.kv_idle_suspend_s);
  BatchFormation formation = BatchFormation::DecodeFirst;
  if (c.batch_formation == "fcfs")
    formation = BatchFormation::Fcfs;
  else if (c.batch_formation != "decode-first")
    fail("--batch-formation must be decode-first or fcfs, not '{}'", c.batch_formation);

  // Runtime.
  require(c.runtime_threads >= 1, "--runtime-threads",
          fmt::format("must be at least 1, not {}", c.runtime_threads));
  seconds_option("--inferlet-cpu-limit", c.inferlet_cpu_limit_s);
  // Wasm32 linear memory tops out at 4 GiB.
  require(c.inferlet_memory_mb >= 1 && c.inferlet_memory_mb <= 4096, "--inferlet-memory-mb",
          fmt::format("must be between 1 and 4096, not {}", c.inferlet_memory_mb));

  // HTTP.
  require(!c.host.empty(), "--host", "must name an address to listen on");
  require(c.max_upload_bytes > 0, "--max-upload-bytes", "must be more than 0");
  require(c.max_body_bytes > 0, "--max-body-bytes", "must be more than 0");
  require(c.http_idle_timeout_s >= 1, "--http-idle-timeout",
          fmt::format("must be at least 1 second, not {}", c.http_idle_timeout_s));
  require(c.inferlet_max_message_bytes > 0, "--inferlet-max-message-bytes", "must be more than 0");
  require(c.max_instances > 0, "--max-instances", "must be at least 1");
  require(c.event_buffer > 0, "--event-buffer", "must keep at least 1 event");
  require(c.event_buffer_bytes > 0, "event buffer bytes", "must be more than 0");
  seconds_option("--orphan-grace", c.orphan_grace_s);
  seconds_option("--drain-timeout", c.drain_timeout_s);
  seconds_option("--log-interval", c.log_interval_s);
  seconds_option("finished instance TTL", c.finished_ttl_s);
  s.api_keys = read_api_keys(c);
  require(c.replica_id.size() <= 63 &&
              std::all_of(c.replica_id.begin(), c.replica_id.end(),
                          [](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
                                   ch == '-';
                          }),
          "--replica-id",
          fmt::format("must be at most 63 letters, digits, '_' or '-' (it prefixes instance ids "
                      "as NAME-RUN-N), not '{}'",
                      c.replica_id));
  if (!c.state_store.empty()) {
    try {
      runtime::RedisUrl::parse(c.state_store);
    } catch (const Error& e) {
      fail("--state-store: {}", e.what());
    }
  }

  require(
      c.tool_call_parser == "auto" || parse_tool_call_format(c.tool_call_parser),
      "--tool-call-parser",
      fmt::format(
          "must be auto, hermes, llama3_json, qwen3_coder, gemma4, mistral or harmony, not '{}'",
          c.tool_call_parser));
  require(
      c.reasoning_parser == "auto" || parse_reasoning_format(c.reasoning_parser),
      "--reasoning-parser",
      fmt::format("must be auto, none, deepseek_r1, qwen3, gemma4, mistral or harmony, not '{}'",
                  c.reasoning_parser));
  require(c.pooling == "auto" || c.pooling == "last" || c.pooling == "mean" || c.pooling == "cls",
          "--pooling", fmt::format("must be auto, last, mean or cls, not '{}'", c.pooling));
  if (!c.chat_template.empty()) {
    std::ifstream in(c.chat_template);
    if (!in) fail("cannot read chat template {}", c.chat_template);
    s.chat_template.emplace(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  ServingOptions& so = s.serving;
  so.model_path = c.model;
  so.engine.device = c.device;
  so.engine.gpu_memory_fraction = c.gpu_memory_fraction;
  so.engine.cpu_weight_panels = c.cpu_weight_panels;
  so.engine.cuda_graphs = c.cuda_graphs;
  so.engine.cuda_gemv = c.cuda_gemv;
  so.engine.cuda_attention = cuda_attention;
  so.engine.n_threads = c.threads;
  so.engine.kv_memory_bytes = kv_bytes;
  so.engine.kv_page_size = c.kv_page_size;
  so.engine.kv_dtype = kv_dtype;
  so.engine.state_memory_bytes = state_bytes;
  so.control.policy = c.batch_policy;
  so.control.max_batch_tokens = c.max_batch_tokens;
  so.control.batch_formation = formation;
  so.control.prefix_cache = !c.no_prefix_cache;
  so.control.max_kv_pages_per_instance = c.max_kv_pages_per_inferlet;
  so.control.max_states_per_instance = c.max_states_per_inferlet;
  so.control.max_loras = c.max_loras;
  if (!(c.itl_target_ms >= 0)) fail("--itl-target-ms must be 0 (off) or positive");
  so.control.itl_target_ns = static_cast<int64_t>(c.itl_target_ms * 1e6);
  if (c.max_loras == 0) fail("--max-loras must be at least 1");
  for (const std::string& spec : c.lora) {
    const size_t eq = spec.find('=');
    std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (path.empty()) fail("--lora {}: no path (NAME=PATH)", spec);
    if (name.empty()) {  // named after its file or folder
      std::string base = path;
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      base = base.substr(base.find_last_of('/') + 1);
      name = base.ends_with(".gguf") ? base.substr(0, base.size() - 5) : base;
    }
    try {
      AdapterRegistry::check_name(name);
    } catch (const Error& e) {
      fail("--lora {}: {}", spec, e.what());
    }
    for (const auto& [other, _] : so.lora)
      if (other == name) fail("--lora {}: the name '{}' is given twice", spec, name);
    so.lora.emplace_back(name, path);
  }
  so.control.kv_pressure = c.kv_pressure == "kill" ? KvPressure::Kill : KvPressure::Suspend;
  so.control.swap_bytes = swap_bytes;
  so.control.preemption =
      c.preemption_mode == "recompute" ? Preemption::Recompute : Preemption::Swap;
  so.control.idle_suspend_ns = static_cast<int64_t>(c.kv_idle_suspend_s * 1e9);
  so.runtime.compiler.cache_dir =
      c.native_cache_dir.empty() ? c.cache_dir + "/native" : c.native_cache_dir;
  so.runtime.threads = c.runtime_threads;
  so.runtime.limits.cpu_ns = static_cast<uint64_t>(c.inferlet_cpu_limit_s * 1e9);
  so.runtime.limits.memory_pages = c.inferlet_memory_mb * 16;  // 64 KiB Wasm pages
  so.runtime.limits.max_message_bytes = c.inferlet_max_message_bytes;
  so.runtime.limits.max_messages_per_second = c.inferlet_max_messages_per_second;
  so.runtime.http_allow = c.inferlet_http_allow;
  so.runtime.http_allow_private = c.inferlet_http_allow_private;
  so.runtime.state_store = c.state_store;
  // Export records name the replica; without --replica-id, this host and port.
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  so.runtime.replica = !c.replica_id.empty() ? c.replica_id : fmt::format("{}:{}", host, c.port);
  s.config = std::move(c);
  return s;
}

}  // namespace pith::server
