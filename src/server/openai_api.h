// The OpenAI-compatible surface: request validation (completions and chat completions), and
// CompletionSession, which turns the built-in openai_completion inferlet's per-token messages
// (inferlets/openai_completion, wire format in <pith/openai_protocol.hpp>) into OpenAI responses or
// SSE chunks: incremental detokenization, stop strings (held back until they can no longer match),
// logprobs, usage with cached tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <pith/openai_protocol.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/stream_decoder.h"
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
  std::vector<int32_t> prompt;
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

  // The built-in inferlet's arguments (after argv[0]).
  std::vector<std::string> inferlet_args() const;
};

// Throws InvalidRequest with a client-facing message for an invalid request: a bad value, a field
// this server does not support, or one it does not know (never silently ignored; the table of
// fields is in docs/server-api.md). `context_length`
// bounds prompt + max_tokens; `default_seed` is used when the request has none.
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat,
                                           const Tokenizer& tokenizer,
                                           const ChatTemplate& chat_template,
                                           uint32_t context_length, uint64_t default_seed);

// The chat template applied to a request's `messages` and tokenized (special tokens parsed).
// Throws InvalidRequest (param "messages").
std::vector<int32_t> chat_prompt_tokens(const nlohmann::json& messages, const Tokenizer& tokenizer,
                                        const ChatTemplate& chat_template,
                                        bool add_generation_prompt);

// How a request that failed during generation is answered, chosen by the ABI status the
// failure carries (never by its text): exhausted KV pages or Embed slots are the server's
// capacity (503, worth retrying), anything else is an internal failure (500).
struct FailureResponse {
  unsigned http_status;
  const char* type;  // the OpenAI error body's "type"
};
FailureResponse failure_response(pith_status_t code);

// Text of one choice as tokens arrive: UTF-8-safe streaming with stop-string hold-back.
class ChoiceText {
 public:
  ChoiceText(const Tokenizer& tokenizer, std::vector<std::string> stops);
  // Returns the text that became final. After a stop string matched, stopped() is true and
  // later tokens are ignored.
  std::string push(int32_t token);
  std::string finish();  // at the end: whatever was held back (nothing after a stop)
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  std::string release(std::string s);
  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string held_;  // decoded but not yet final (may be the start of a stop string)
  std::string text_;  // final text so far
  bool stopped_ = false;
};

class CompletionSession {
 public:
  CompletionSession(const CompletionRequest& request, const Tokenizer& tokenizer, std::string id,
                    std::string model, int64_t created);

  // One message of the inferlet. Returns the SSE chunks it produces (stream mode; empty
  // otherwise). An error message is kept as failure() (the first one wins); a malformed
  // message, or one naming a choice or token that does not exist, throws pith::Error.
  std::vector<nlohmann::json> on_message(std::string_view message);
  // After the instance ended normally: finishes every choice; returns the last chunks
  // (finish reasons, usage) in stream mode.
  std::vector<nlohmann::json> finish();
  nlohmann::json response() const;  // the non-streaming response

  bool all_done() const;  // every choice finished (the instance may be ended early)
  uint32_t prompt_tokens() const { return prompt_tokens_; }
  uint32_t cached_tokens() const { return cached_tokens_; }
  uint32_t completion_tokens() const;
  bool saw_token() const { return saw_token_; }
  uint64_t token_messages() const { return token_messages_; }  // every tok message so far
  // The failure the inferlet reported, with its ABI status code.
  const std::optional<openai_protocol::ErrorMessage>& failure() const { return failure_; }

 private:
  struct Choice {
    ChoiceText text;
    uint32_t tokens = 0;
    std::string finish_reason;  // "" while running
    nlohmann::json logprobs;    // chat: {"content": [...]}, completions: {tokens, ...}
    size_t text_offset = 0;
    bool sent_role = false;
  };
  nlohmann::json chunk(nlohmann::json choices) const;
  nlohmann::json choice_delta(uint32_t index, const std::string& text,
                              const nlohmann::json* logprobs, const std::string& finish_reason);
  nlohmann::json usage() const;
  nlohmann::json logprob_entry(int32_t token, double logprob,
                               const std::vector<std::pair<int32_t, double>>& top) const;

  CompletionRequest req_;
  const Tokenizer& tok_;
  std::string id_, model_;
  int64_t created_;
  std::vector<Choice> choices_;
  uint32_t prompt_tokens_ = 0, cached_tokens_ = 0;
  bool saw_token_ = false;
  uint64_t token_messages_ = 0;
  std::optional<openai_protocol::ErrorMessage> failure_;
};

}  // namespace pith::server
