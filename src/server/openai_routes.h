// The OpenAI-compatible routes: GET /v1/models, POST /v1/completions and
// /v1/chat/completions. A request is validated and tokenized here (openai_api.h), then run by
// the built-in openai_completion inferlet like any other instance; its messages
// (<pith/openai_protocol.hpp>) become the response or SSE chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/instance_launcher.h"
#include "server/reasoning.h"
#include "server/server_context.h"
#include "server/tool_calls.h"

namespace pith {
class ChatTemplate;
}

namespace pith::server {

// The built-in program's name in the program store.
inline constexpr const char* kCompletionProgram = "openai_completion";

struct ServedModel {
  std::string name;
  uint32_t context_length = 0;
  int64_t created_unix = 0;  // reported as the model's "created"
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  ReasoningFormat reasoning = ReasoningFormat::None;
};

class OpenAiRoutes {
 public:
  OpenAiRoutes(ServerContext& ctx, InstanceLauncher& launcher, ServedModel model,
               std::unique_ptr<ChatTemplate> chat_template);
  ~OpenAiRoutes();

  asio::awaitable<void> models(HttpExchange& ex);
  asio::awaitable<void> model(HttpExchange& ex, const std::string& id);  // GET /v1/models/{id}
  asio::awaitable<void> tokenize(HttpExchange& ex);                      // POST /tokenize
  asio::awaitable<void> detokenize(HttpExchange& ex);                    // POST /detokenize
  asio::awaitable<void> completion(HttpExchange& ex, bool chat, const std::string& owner);

 private:
  nlohmann::json model_object() const;
  // The body of a tokenizer route as JSON, after the "model" check; nullopt once answered.
  asio::awaitable<std::optional<nlohmann::json>> tokenizer_request(HttpExchange& ex);

  ServerContext& ctx_;
  InstanceLauncher& launcher_;
  ServedModel model_;
  std::unique_ptr<ChatTemplate> chat_template_;
};

}  // namespace pith::server
