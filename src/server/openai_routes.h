// The OpenAI-compatible routes: GET /v1/models, POST /v1/completions and
// /v1/chat/completions. A request is validated and tokenized here (openai_api.h), then run by
// the built-in openai_completion inferlet like any other instance; its messages
// (<pith/openai_protocol.hpp>) become the response or SSE chunks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "control/adapter_registry.h"
#include "server/completion_session.h"
#include "server/instance_launcher.h"
#include "server/reasoning.h"
#include "server/server_context.h"
#include "server/tool_calls.h"

namespace pith {
class ChatTemplate;
}

namespace pith::server {

class ResponsesStore;

// The built-in programs' names in the program store.
inline constexpr const char* kCompletionProgram = "openai_completion";
inline constexpr const char* kEmbeddingProgram = "openai_embedding";
// The stored responses (store: true) kept for previous_response_id: at most this many, in at most
// this many bytes of JSON; the oldest goes first.
inline constexpr size_t kStoredResponses = 1000;
inline constexpr size_t kStoredResponseBytes = size_t(256) << 20;

struct ServedModel {
  std::string name;
  uint32_t context_length = 0;
  int64_t created_unix = 0;  // reported as the model's "created"
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  ReasoningFormat reasoning = ReasoningFormat::None;
  bool reasoning_from_template = false;  // --reasoning-parser auto: decided per rendered prompt
  std::string pooling = "last";          // /v1/embeddings: last | mean | cls
};

class OpenAiRoutes {
 public:
  OpenAiRoutes(ServerContext& ctx, InstanceLauncher& launcher, ServedModel model,
               std::unique_ptr<ChatTemplate> chat_template);
  ~OpenAiRoutes();

  asio::awaitable<void> models(HttpExchange& ex);
  asio::awaitable<void> model(HttpExchange& ex, const std::string& id);  // GET /v1/models/{id}
  // vLLM's runtime adapter routes: POST /v1/load_lora_adapter {"lora_name", "lora_path"} and
  // POST /v1/unload_lora_adapter {"lora_name"}.
  asio::awaitable<void> load_lora(HttpExchange& ex);
  asio::awaitable<void> unload_lora(HttpExchange& ex);
  asio::awaitable<void> tokenize(HttpExchange& ex);    // POST /tokenize
  asio::awaitable<void> detokenize(HttpExchange& ex);  // POST /detokenize
  asio::awaitable<void> completion(HttpExchange& ex, bool chat, const std::string& owner);
  // OpenAI's Responses API (responses_routes.cpp): POST /v1/responses, and GET / DELETE
  // /v1/responses/{id} on the stored ones.
  asio::awaitable<void> responses(HttpExchange& ex, const std::string& owner);
  asio::awaitable<void> stored_response(HttpExchange& ex, const std::string& id);
  // POST /v1/embeddings (embedding_routes.cpp): the pooled final hidden states of each input,
  // computed by the built-in openai_embedding inferlet.
  asio::awaitable<void> embeddings(HttpExchange& ex, const std::string& owner);

 private:
  using Clock = std::chrono::steady_clock;
  // Chunks of a CompletionSession as the text an endpoint streams.
  using SseFrames = std::function<std::string(const std::vector<nlohmann::json>&)>;
  // What one run of the completion inferlet ended with.
  struct Generation {
    std::unique_ptr<CompletionSession> session;  // null: already answered (error, client gone)
    std::optional<openai_protocol::ErrorMessage> failure;  // generation failed
  };

  // A chat (or completions) body as the inferlet's request, after the model check; nullopt once
  // the error is answered (`rename`, when not null, words the error for another endpoint: it may
  // change the field at fault and the message).
  asio::awaitable<std::optional<CompletionRequest>> completion_request(
      HttpExchange& ex, const nlohmann::json& body, const nlohmann::ordered_json* ordered,
      bool chat, void (*rename)(std::string& param, std::string& message));
  // Launches the completion inferlet and feeds its messages to a CompletionSession. Streaming:
  // begins the stream, writes `opening`, then each batch of chunks as `frames` makes it. The
  // caller answers a failure and finishes the session.
  asio::awaitable<Generation> generate(HttpExchange& ex, const CompletionRequest& req,
                                       const std::string& owner, std::string id,
                                       std::string opening, const SseFrames& frames,
                                       Clock::time_point t_request);

  nlohmann::json model_object() const;
  nlohmann::json adapter_object(const AdapterInfo& adapter) const;
  std::string served_names() const;  // "'base', 'adapter', ..." for errors
  // The body of a tokenizer route as JSON, after the "model" check; nullopt once answered.
  asio::awaitable<std::optional<nlohmann::json>> tokenizer_request(HttpExchange& ex);

  ServerContext& ctx_;
  InstanceLauncher& launcher_;
  ServedModel model_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::unique_ptr<ResponsesStore> responses_store_;
};

}  // namespace pith::server
