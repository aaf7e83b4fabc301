// `pith bench agents`: the paper's Fig. 6. For each workload (ReAct, CodeAct, Swarm:
// bench/agent_workloads.h), N concurrent tasks run
//   inferlet: with the agent's loop inside the server (the instance keeps its KV context
//             across tool calls and actions; swarm agents talk by broadcast/subscribe);
//   client:   driven from outside over the OpenAI API of a `pith serve` child (one
//             /v1/completions request per generated segment, the transcript sent again each
//             time, the server's prefix cache reusing what it can) - the baseline, in the same
//             run, alternated with the inferlet runs.
// Reports tasks/s, task latency p50/p99 and the ratio per workload, and their geometric mean.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pith::bench {

struct AgentsBenchOptions {
  std::string model;
  std::vector<std::string> workloads;  // react, codeact, swarm; empty: all three
  int agents = 8;                      // concurrent tasks (agents; swarms for the swarm workload)
  int calls = 8;                       // ReAct tool calls, CodeAct turns per task
  int swarm_size = 4;                  // workers in each swarm's pipeline
  int step_tokens = 4;                 // tokens generated before each call (and after the last)
  int tool_ms = 0;                     // the tool's own latency
  int runs = 1;                        // alternated inferlet / client runs; medians
  int threads = 2;                     // engine threads
  std::string device = "auto";         // cpu | cuda | cuda:N | auto
  std::string inferlet_dir;            // "" = the build tree
  std::string cache_dir;               // native cache ("" = default)
};

nlohmann::json run_agents_bench(const AgentsBenchOptions& options);

}  // namespace pith::bench
