// ServeConfig: everything `pith serve` can be told, from flags, PITH_* environment variables
// or a TOML file (src/cli/cmd_serve.cpp merges them: flag > environment > file > default).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pith::server {

struct ServeConfig {
  // Model and engine.
  std::string model;
  std::string device = "auto";       // cpu | cuda | cuda:N | auto (cuda when a GPU is present)
  double gpu_memory_fraction = 0.9;  // CUDA: cap on weights + KV pool + scratch
  bool cpu_weight_panels = true;     // CPU: Q8_0 / BF16 repacked at load (BackendOptions)
  bool cuda_graphs = true;           // CUDA: decode steps replayed as graphs (BackendOptions)
  bool cuda_gemv = true;             // CUDA: the own GEMV where it measured faster (BackendOptions)
  // CUDA: the paged-attention kernel, auto | flashinfer | pith (BackendOptions)
  std::string cuda_attention = "auto";
  size_t threads = 0;  // engine threads (0: one per core)
  std::string kv_memory = "512M";
  uint32_t kv_page_size = 16;
  std::string kv_dtype = "auto";  // auto | f32 | f16 | bf16 (backend/kv_dtype.h)
  std::string chat_template;      // Jinja file overriding the model's template
  std::string tool_call_parser =
      "auto";  // auto (from the template) | hermes | llama3_json | qwen3_coder
  std::string reasoning_parser = "auto";  // auto (from the template) | none | deepseek_r1 | qwen3
  std::string pooling =
      "auto";  // /v1/embeddings: auto (the model file's, else last) | last | mean | cls

  // Control layer.
  std::string batch_policy = "adaptive";
  uint32_t max_batch_tokens = 512;
  double itl_target_ms = 500;  // bound on prefill work beside decodes (0: off)
  std::string batch_formation = "decode-first";
  bool no_prefix_cache = false;
  uint32_t max_kv_pages_per_inferlet = 0;
  std::string state_memory;              // hybrid models' recurrent states ("": the KV budget)
  uint32_t max_states_per_inferlet = 0;  // 0: no quota
  std::vector<std::string> lora;  // NAME=PATH (or PATH: named after its file), loaded at startup
  uint32_t max_loras = 64;        // adapters loaded at once
  std::string kv_pressure = "suspend";   // suspend | kill
  std::string swap_memory = "4G";        // host memory for suspended inferlets' KV pages
  std::string preemption_mode = "swap";  // swap | recompute: how suspended pages come back
  double kv_idle_suspend_s = 1;          // idle this long: may be suspended by anyone (0: never)

  // Runtime.
  std::string cache_dir;  // programs/ and native/ below it (default ~/.cache/pith)
  // Compiled native code only (default <cache_dir>/native): replicas, or many short-lived
  // servers, can share one while each keeps its own uploaded programs.
  std::string native_cache_dir;
  int runtime_threads = 1;
  double inferlet_cpu_limit_s = 60;
  uint32_t inferlet_memory_mb = 64;
  std::vector<std::string> inferlet_http_allow;
  bool inferlet_http_allow_private = false;      // listed names may resolve to private addresses
  size_t inferlet_max_message_bytes = 4u << 20;  // one client/pub-sub message, either way
  uint32_t inferlet_max_messages_per_second = 100000;  // out of one instance (0: unlimited)

  // HTTP.
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::vector<std::string> api_keys;
  std::string api_keys_file;  // one key per line, '#' comments
  size_t max_upload_bytes = 64u << 20;
  size_t max_body_bytes = 4u << 20;
  double http_idle_timeout_s = 120;    // a connection silent this long (slow headers too) is closed
  uint32_t max_instances = 1024;       // running at once, all clients
  uint32_t max_instances_per_key = 0;  // 0: only the total limit
  size_t event_buffer = 4096;          // events kept per instance
  size_t event_buffer_bytes = 4u << 20;
  double finished_ttl_s = 600;  // finished instances stay listed this long
  double orphan_grace_s = 5;    // non-detached instance without event stream
  double drain_timeout_s = 30;  // SIGTERM: OpenAI requests in flight may finish this long
  double log_interval_s = 10;   // periodic stats line (0: off)

  // Replicas (docs/scale-out.md).
  std::string replica_id;   // prefixes instance ids ("r1-42") so a proxy can route by them
  std::string state_store;  // redis://…: KV store, pub/sub, programs shared by the replicas
};

}  // namespace pith::server
