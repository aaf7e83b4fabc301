// The three agent workloads of the paper's Fig. 6, each as one task run two ways:
//   inside the server: the agent's loop is an inferlet (or several cooperating ones) launched on
//                      an in-process ServingStack, keeping its KV context across actions;
//   from a client:     the same loop driven over the OpenAI API of a `pith serve` child, one
//                      /v1/completions request per generated segment with the transcript sent
//                      again each time (the server's prefix cache reusing what it can).
// react:   N tool calls over HTTP (a local tool answering after --tool-ms), agent_react;
// codeact: N turns of thought + JavaScript action run in Duktape (inside the inferlet's Wasm
//          module; in the client, the host's libduktape) + observation, agent_codeact;
// swarm:   a coordinator and --swarm-size workers in a pipeline, each worker reading the task
//          and every earlier contribution and adding its own (agent_swarm: broadcast/subscribe
//          between instances; the client relays the document itself).
// Each counts the actions it saw (tool calls, JavaScript evaluations, worker contributions) so
// the bench can check that both sides did all the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_agents.h"

namespace pith {
class ServingStack;
namespace runtime {
class Program;
}  // namespace runtime
}  // namespace pith

namespace pith::bench {

class AgentWorkload {
 public:
  // `inferlet`: the module the server side runs (agent_react, agent_codeact, agent_swarm).
  AgentWorkload(const AgentsBenchOptions& options, std::string inferlet)
      : o_(options), inferlet_(std::move(inferlet)) {}
  virtual ~AgentWorkload() = default;
  virtual const char* name() const = 0;  // react | codeact | swarm
  virtual std::string describe() const = 0;
  // Loads the inferlet into `stack` (and waits for its native code).
  void load(ServingStack& stack, const std::string& inferlet_dir);
  // One task inside the server (`i`, unique in the bench, makes its prompt and topics its own);
  // throws on failure.
  virtual void run_inferlet(ServingStack& stack, int i) = 0;
  // The same task over the OpenAI API at `url` (model `model`); throws on failure.
  virtual void run_client(const std::string& url, const std::string& model, int i) = 0;
  // Actions each task performs, and the total seen so far (both sides together).
  virtual uint64_t actions_per_task() const = 0;
  uint64_t actions() const { return actions_; }

 protected:
  const AgentsBenchOptions& o_;
  std::shared_ptr<runtime::Program> program_;  // after load()
  std::atomic<uint64_t> actions_{0};

 private:
  std::string inferlet_;
};

// "react", "codeact" or "swarm"; fails on another name.
std::unique_ptr<AgentWorkload> make_agent_workload(const std::string& name,
                                                   const AgentsBenchOptions& options);

// The workloads `--workloads` chose, in the bench's order (all three for an empty choice); fails
// on an unknown name.
std::vector<std::string> agent_workload_names(const std::vector<std::string>& chosen);

}  // namespace pith::bench
