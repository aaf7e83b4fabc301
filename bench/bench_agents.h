// `pith bench agents`: the ReAct row of the paper's Fig. 6. N concurrent agents each generate
// with `calls` tool calls in between (a local HTTP tool answering after `tool_ms`):
//   inferlet: agents/react's loop inside the server (agent_react: the instance parks on the
//             HTTP call and keeps its KV cache; one launch per agent);
//   client:   the same loop driven from outside over the OpenAI API of a `pith serve` child
//             (one /v1/completions request per segment, the transcript sent again each time,
//             the server's prefix cache reusing what it can) - the baseline, in the same run,
//             alternated with the inferlet runs.
// Reports agents/s, agent latency p50/p99 and the ratio. CodeAct and Swarm are not in it yet.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct AgentsBenchOptions {
  std::string model;
  int agents = 8;               // concurrent agents
  int calls = 8;                // tool calls per agent
  int step_tokens = 4;          // tokens generated before each call (and after the last)
  int tool_ms = 0;              // the tool's own latency
  int runs = 1;                 // alternated inferlet / client runs; medians
  int threads = 2;              // engine threads
  std::string device = "auto";  // cpu | cuda | cuda:N | auto
  std::string inferlet_dir;     // "" = the build tree
  std::string cache_dir;        // native cache ("" = default)
};

nlohmann::json run_agents_bench(const AgentsBenchOptions& options);

}  // namespace pith::bench
