// Router-facing gauges over the controller's counts. See router_metrics.h.
#include "server/router_metrics.h"

#include <fmt/format.h>

#include <chrono>

#include "stack/serving_stack.h"

namespace pith::server {

void register_router_metrics(Metrics& metrics, ServingStack& stack, RouterLoad load) {
  Controller& ctl = stack.controller();
  const uint32_t page_size = stack.controller().page_size();
  // KV usage as routers mean it: pages held by running work. Prefix-cache pages that nothing
  // holds are evictable, so they count as free (as vLLM counts its cached free blocks).
  auto kv_usage = [&ctl] {
    auto g = ctl.gauges();
    if (g.pages_total == 0) return 0.0;
    return double(g.pages_total - g.pages_free - g.pages_cached) / double(g.pages_total);
  };
  auto running = [load] { return double(load.running_requests()); };
  // Work not yet scheduled: calls waiting in command queues for a batch, and instances waiting
  // for KV memory or suspended to host memory (what vLLM counts as waiting or preempted).
  auto waiting = [&ctl] {
    const ControllerGauges g = ctl.gauges();
    return double(g.queue_depth) + g.kv_waiting + g.instances_suspended;
  };

  metrics.gauge("vllm:num_requests_running", "Requests being served (vLLM name)", running);
  metrics.gauge("vllm:num_requests_waiting", "Model calls waiting for a batch (vLLM name)",
                waiting);
  metrics.gauge("vllm:kv_cache_usage_perc", "KV cache usage, 0-1 (vLLM name)", kv_usage);
  metrics.gauge("vllm:gpu_cache_usage_perc", "KV cache usage, 0-1 (older vLLM name)", kv_usage);
  metrics.gauge(
      "vllm:cache_config_info", "KV cache configuration (vLLM name; the labels carry it)",
      [] { return 1.0; },
      fmt::format("block_size=\"{}\",num_gpu_blocks=\"{}\"", page_size, ctl.gauges().pages_total));
  metrics.gauge("sglang:num_running_reqs", "Requests being served (SGLang name)", running);
  metrics.gauge("sglang:num_queue_reqs", "Model calls waiting for a batch (SGLang name)", waiting);
  metrics.gauge("sglang:token_usage", "KV cache usage, 0-1 (SGLang name)", kv_usage);
  // LoRA adapters as vLLM reports them (the Gateway API Inference Extension routes by them):
  // one series whose labels name the adapters in use and the most this replica loads, valued
  // at the time of the sample. "Running" = opened by a live instance; pith does not hold an
  // adapter back for lack of slots, so none is ever waiting.
  AdapterRegistry& adapters = ctl.adapters();
  metrics.gauge_labeled(
      "vllm:lora_requests_info", "LoRA adapters in use (vLLM name; the labels carry them)",
      [&adapters] {
        std::string running;
        for (const AdapterInfo& a : adapters.list())
          if (a.users > 0) running += (running.empty() ? "" : ",") + a.name;
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        return std::pair{fmt::format("running_lora_adapters=\"{}\",max_lora=\"{}\","
                                     "waiting_lora_adapters=\"\"",
                                     running, adapters.max_loaded()),
                         now};
      });
  metrics.gauge("pith_lora_adapters_loaded", "LoRA adapters loaded",
                [&adapters] { return double(adapters.size()); });
  metrics.gauge("pith_lora_adapter_bytes", "Bytes of the loaded LoRA adapters' weights",
                [&adapters] {
                  double n = 0;
                  for (const AdapterInfo& a : adapters.list()) n += double(a.weight_bytes);
                  return n;
                });
  metrics.gauge("pith_draining", "1 while a SIGTERM drain finishes the requests in flight",
                [load] { return load.draining() ? 1.0 : 0.0; });
}

}  // namespace pith::server
