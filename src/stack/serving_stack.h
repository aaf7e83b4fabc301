// ServingStack: one loaded model with everything that serves it, wired layer by layer —
// weights and tokenizer, the backend (inference layer: CPU engine or CUDA), the controller (control
// layer), the runtime with its ModelApi bridge (application layer). `pith serve`, the benchmarks
// and the end-to-end tests all build the same stack from the same options.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/backend.h"
#include "control/controller.h"
#include "engine/model_weights.h"
#include "runtime/control_model_api.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

namespace pith {

struct ServingOptions {
  std::string model_path;
  BackendOptions engine;           // --device, --kv-page-size, --kv-memory, threads; device
                                   // "fake": the weightless test backend, config only
  ControllerOptions control;       // --batch-policy, --max-batch-tokens, --no-prefix-cache, quotas
  runtime::RuntimeConfig runtime;  // cache dir, limits (its `model` is filled in by the stack)
  bool quiet_load = false;
  // LoRA adapters loaded at startup: (name, PEFT folder or GGUF adapter).
  std::vector<std::pair<std::string, std::string>> lora;
  // Called with the instance's id just before the contention policy ends it to free KV memory
  // (the server answers its clients by that cause, not by the reason's text).
  std::function<void(uint64_t instance_id)> on_memory_kill;
};

class ServingStack {
 public:
  explicit ServingStack(ServingOptions options);
  ~ServingStack();

  // With the fake backend, only `config`, `source` and `format` are filled (no tensors).
  const ModelWeights& weights() const { return *weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Backend& backend() { return *backend_; }
  Controller& controller() { return *controller_; }
  runtime::Runtime& runtime() { return *runtime_; }
  const std::string& model_name() const { return model_name_; }

  // Loads a LoRA adapter under `name` (engine/lora_adapter.h, control/adapter_registry.h).
  // Throws pith::Error naming the path and the problem, or why the registry refuses it.
  // With `replace`, an adapter already loaded under `name` gives way once the new one has been
  // read (vLLM's load_inplace); requests running with the old one finish with it.
  AdapterInfo load_adapter(const std::string& name, const std::string& path, bool replace = false);

  // Launches an instance and remembers it so the contention policy can end it.
  std::shared_ptr<runtime::Instance> launch(const std::shared_ptr<runtime::Program>& program,
                                            std::vector<std::string> args,
                                            runtime::EventSink sink = {});

 private:
  void kill_for_memory(uint64_t instance_id, const std::string& reason);

  ServingOptions options_;
  std::shared_ptr<const ModelWeights> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string model_name_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<runtime::ControlModelApi> model_api_;
  std::unique_ptr<runtime::Runtime> runtime_;

  std::mutex mu_;
  std::unordered_map<uint64_t, std::weak_ptr<runtime::Instance>> instances_;
};

}  // namespace pith
