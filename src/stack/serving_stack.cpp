#include "stack/serving_stack.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "common/error.h"
#include "engine/gguf_loader.h"
#include "engine/hf_loader.h"
#include "engine/lora_adapter.h"
#include "engine/model_loader.h"
#include "formats/gguf.h"

namespace pith {

namespace {

// The fake backend reads only the config: the model file's metadata, no tensors mapped or
// converted (a vocabulary-only GGUF serves as well as a full model).
std::shared_ptr<const ModelWeights> load_config_only(const std::string& path) {
  auto w = std::make_shared<ModelWeights>();
  if (std::filesystem::is_directory(path)) {
    w->config = hf_model_config(path);
    w->format = "hf";
  } else {
    w->config = gguf_model_config(GGUFFile(path));
    w->format = "gguf";
  }
  w->source = path;
  return w;
}

}  // namespace

ServingStack::ServingStack(ServingOptions options) : options_(std::move(options)) {
  weights_ = options_.engine.device == "fake"
                 ? load_config_only(options_.model_path)
                 : load_model(options_.model_path, LoadOptions{.quiet = options_.quiet_load});
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(options_.model_path));
  model_name_ = weights_->config.name.empty()
                    ? std::filesystem::path(options_.model_path).stem().string()
                    : weights_->config.name;
  backend_ = make_backend(weights_, options_.engine);
  controller_ = std::make_unique<Controller>(*backend_, options_.control);
  model_api_ = std::make_unique<runtime::ControlModelApi>(
      *controller_, *tokenizer_, model_name_,
      [this](uint64_t id, const std::string& reason) { kill_for_memory(id, reason); });
  runtime::RuntimeConfig rc = options_.runtime;
  rc.model = model_api_.get();
  runtime_ = std::make_unique<runtime::Runtime>(rc);
  for (const auto& [name, path] : options_.lora) {
    AdapterInfo a;
    try {
      a = load_adapter(name, path);
    } catch (const Error& e) {
      fail("--lora {}={}: {}", name, path, e.what());
    }
    if (!options_.quiet_load)
      spdlog::info("LoRA adapter '{}': {} ({}, rank {}, alpha {}, {}; {:.1f} MiB)", a.name,
                   a.source, a.format, a.rank, a.alpha, a.targets,
                   double(a.weight_bytes) / (1 << 20));
  }
}

AdapterInfo ServingStack::load_adapter(const std::string& name, const std::string& path,
                                       bool replace) {
  if (options_.engine.device == "fake")
    fail("{}: LoRA adapters need a backend with weights (the fake backend has none)", path);
  AdapterRegistry::check_name(name);  // before reading anything from disk
  if (!replace && controller_->adapters().open(name))
    fail("an adapter named '{}' is already loaded", name);
  auto adapter = load_lora_adapter(path, *weights_);
  if (replace) controller_->adapters().unload(name);
  AdapterInfo info;
  info.source = path;
  info.format = adapter->format;
  info.targets = adapter->targets();
  info.rank = adapter->rank;
  info.alpha = adapter->alpha;
  info.weight_bytes = adapter->weight_bytes();
  return controller_->adapters().load(name, std::move(adapter), std::move(info));
}

ServingStack::~ServingStack() {
  runtime_.reset();  // ends every instance (their sessions release control-layer state)
  model_api_.reset();
  controller_.reset();  // stops the dispatcher
}

std::shared_ptr<runtime::Instance> ServingStack::launch(
    const std::shared_ptr<runtime::Program>& program, std::vector<std::string> args,
    runtime::EventSink sink) {
  auto inst = runtime_->launch(program, std::move(args), std::move(sink));
  std::lock_guard lock(mu_);
  // Forget ended instances as we go so the map stays small.
  for (auto it = instances_.begin(); it != instances_.end();)
    it = it->second.expired() ? instances_.erase(it) : std::next(it);
  instances_[inst->id()] = inst;
  return inst;
}

void ServingStack::kill_for_memory(uint64_t instance_id, const std::string& reason) {
  std::shared_ptr<runtime::Instance> inst;
  {
    std::lock_guard lock(mu_);
    auto it = instances_.find(instance_id);
    if (it != instances_.end()) inst = it->second.lock();
  }
  if (!inst) return;
  if (options_.on_memory_kill) options_.on_memory_kill(instance_id);
  inst->terminate(reason);
}

}  // namespace pith
