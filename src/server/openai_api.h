// The OpenAI-compatible requests: validation of completions and chat completions into a
// CompletionRequest (the built-in inferlet's arguments). The responses are built by
// CompletionSession (completion_session.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace pith {
class ChatTemplate;
}

namespace pith::server {

// A request the OpenAI surface refuses (HTTP 400, type invalid_request_error): the message, and
// the request field at fault as OpenAI's "param" (empty when the request as a whole is bad).
class InvalidRequest : public std::runtime_error {
 public:
  InvalidRequest(std::string param, const std::string& message)
      : std::runtime_error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

struct CompletionRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string model;
  std::string adapter;  // the LoRA adapter `model` names (set by the routes); empty: the base
  std::vector<std::vector<int32_t>> prompts;  // completions may batch; chat has one
  bool echo = false;                          // completions: the prompt leads each text
  std::vector<std::string> echo_texts;        // per prompt, as sent (decoded for token ids)
  uint32_t max_tokens = 16;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  uint32_t top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  uint32_t n = 1;
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  // Sampling controls (OpenAI's and vLLM's extra parameters).
  float presence_penalty = 0.0f, frequency_penalty = 0.0f, repetition_penalty = 1.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::string grammar;     // GBNF from response_format or a forced tool call; empty: unconstrained
  std::string prediction;  // a predicted output's text (drafts from it); empty: none
  // vLLM's return_token_ids: the prompt's and each choice's token ids in the response.
  bool return_token_ids = false;
  ToolRequest tools;
  // The tools came as the deprecated `functions`: the response names its one call as
  // message.function_call (legacy_functions.h).
  bool legacy_functions = false;
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  ReasoningFormat reasoning = ReasoningFormat::None;  // chat: how thoughts are told apart
  // Chat: the rendered prompt ends inside an open <think> (the template opened the thought,
  // unless chat_template_kwargs such as enable_thinking = false closed it).
  bool prompt_opens_thought = false;

  // The built-in inferlet's arguments (after argv[0]).
  std::vector<std::string> inferlet_args() const;
};

// Throws InvalidRequest with a client-facing message for an invalid request: a bad value, a field
// this server does not support, or one it does not know (never silently ignored; the table of
// fields is in docs/server-api.md). `context_length`
// bounds prompt + max_tokens; `default_seed` is used when the request has none. `ordered_body`
// (optional) is the same body with members in the order sent: a response_format schema's
// properties are generated in that order.
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const Tokenizer& tokenizer,
                                           const ChatTemplate& chat_template,
                                           uint32_t context_length, uint64_t default_seed,
                                           const nlohmann::ordered_json* ordered_body = nullptr,
                                           ToolCallFormat tool_format = ToolCallFormat::Hermes);

// object[key] when it is a string, else `fallback`. For request bodies: nlohmann's value() throws
// a type_error worded for programmers when the member has another type, where the client must
// get a 400 naming the field.
template <typename Json>
std::string string_or(const Json& object, const char* key, std::string fallback = {}) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->template get<std::string>() : fallback;
}

// A chat message's text: its string content, or its text parts joined (null: ""). Throws
// InvalidRequest (param "messages") for other content.
std::string message_text(const nlohmann::json& message);

// The chat template applied to a request's `messages` (tool calls and results included) and
// `tools` (null: none), tokenized with special tokens parsed. `template_kwargs` (a request's
// chat_template_kwargs, e.g. {"enable_thinking": false}) are further template variables;
// `rendered` receives the prompt text. Throws InvalidRequest (param "messages").
std::vector<int32_t> chat_prompt_tokens(const nlohmann::json& messages, const Tokenizer& tokenizer,
                                        const ChatTemplate& chat_template,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json* tools = nullptr,
                                        const nlohmann::json* template_kwargs = nullptr,
                                        std::string* rendered = nullptr);

}  // namespace pith::server
