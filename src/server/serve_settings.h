// ServeSettings: a ServeConfig checked and converted into what the server and the serving stack
// take. Done before the port opens, so every invalid option (unknown batch policy or formation,
// a bad byte size, device or limit, an unreadable key or template file) ends `pith serve` at
// startup with a message naming the option, without listening.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "server/serve_config.h"
#include "stack/serving_stack.h"

namespace pith::server {

struct ServeSettings {
  ServeConfig config;                        // as given, with cache_dir resolved
  ServingOptions serving;                    // model, engine, control layer, runtime
  std::set<std::string> api_keys;            // --api-key and --api-keys-file together
  std::optional<std::string> chat_template;  // text of --chat-template when given
};

// Throws pith::Error naming the first invalid option.
ServeSettings resolve_serve_config(ServeConfig config);

// Accepts what make_backend parses (auto, cpu, cuda, cuda:N); throws pith::Error for anything
// else, and for a CUDA device when no GPU is available at all (whether index N exists is the
// backend's to say when it is built).
void check_device(const std::string& device);

}  // namespace pith::server
