// The load gauges LLM routers read from a replica's /metrics, under the names they read by
// default: vLLM's (vllm-router, the Gateway API Inference Extension's model server protocol,
// llm-d) and SGLang's (sglang-router), beside pith's own pith_* metrics. docs/server-api.md
// lists them and the router flags that select them.
#pragma once

#include <cstddef>
#include <functional>

#include "server/metrics.h"

namespace pith {
class ServingStack;
}

namespace pith::server {

// What only the HTTP layer knows.
struct RouterLoad {
  std::function<size_t()> running_requests;  // OpenAI requests being served
  std::function<bool()> draining;            // SIGTERM received, finishing requests
};

void register_router_metrics(Metrics& metrics, ServingStack& stack, RouterLoad load);

}  // namespace pith::server
