// InstanceLauncher: starts an inferlet instance for a client (the lifecycle API and the OpenAI
// endpoints alike) within the server's limits, records it in the registry and turns its
// runtime events into the instance's event log; describe() is its JSON view.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/server_context.h"

namespace pith::server {

struct LaunchError {
  http::status status;
  std::string type, message;
};

struct Launched {
  std::shared_ptr<InstanceRecord> record;
  std::optional<LaunchError> error;
};

class InstanceLauncher {
 public:
  explicit InstanceLauncher(ServerContext& ctx) : ctx_(ctx) {}

  // `hash` names an uploaded or built-in program; `owner` is the API key ("" without auth).
  Launched launch(const std::string& hash, std::vector<std::string> args, const std::string& owner,
                  bool detach);
  nlohmann::json describe(const InstanceRecord& r) const;

 private:
  ServerContext& ctx_;
};

const char* exit_kind_name(runtime::ExitStatus::Kind k);

}  // namespace pith::server
