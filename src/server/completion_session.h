// CompletionSession turns the built-in openai_completion inferlet's per-token messages
// (inferlets/openai_completion, wire format in <pith/openai_protocol.hpp>) into OpenAI responses
// or SSE chunks: incremental detokenization, stop strings (held back until they can no longer
// match), logprobs, usage with cached tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <pith/openai_protocol.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_api.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace pith::server {

// How a request that failed during generation is answered, chosen by the ABI status the
// failure carries (never by its text): exhausted KV pages or Embed slots are the server's
// capacity (503, worth retrying), anything else is an internal failure (500).
// n random lowercase hex digits (response and tool-call ids).
std::string random_hex(size_t n);

struct FailureResponse {
  unsigned http_status;
  const char* type;  // the OpenAI error body's "type"
};
FailureResponse failure_response(pith_status_t code);

// Text of one choice as tokens arrive: UTF-8-safe streaming with stop-string hold-back.
class ChoiceText {
 public:
  // `kept`: sorted ids of control tokens whose text stays in the output (the tool-call markers
  // a format's parser needs); other special tokens are left out.
  ChoiceText(const Tokenizer& tokenizer, std::vector<std::string> stops,
             std::vector<int32_t> kept = {});
  // Returns the text that became final. After a stop string matched, stopped() is true and
  // later tokens are ignored.
  std::string push(int32_t token);
  std::string finish();  // at the end: whatever was held back (nothing after a stop)
  // echo: the prompt's text leads the final text (it is never matched against stop strings).
  void set_echo(const std::string& prompt_text) { text_ = prompt_text; }
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  std::string release(std::string s);
  StreamDecoder decoder_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> kept_;
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
  uint64_t accepted_prediction_tokens() const { return accepted_prediction_; }
  uint64_t rejected_prediction_tokens() const { return rejected_prediction_; }
  uint32_t completion_tokens() const;
  bool saw_token() const { return saw_token_; }
  uint64_t token_messages() const { return token_messages_; }  // every tok message so far
  // The failure the inferlet reported, with its ABI status code.
  const std::optional<openai_protocol::ErrorMessage>& failure() const { return failure_; }

 private:
  struct StoredToolCall {
    std::string id, name, arguments;
  };
  struct Choice {
    ChoiceText text;
    ReasoningSplitter reasoning;
    uint32_t tokens = 0;
    std::string finish_reason;  // "" while running
    nlohmann::json logprobs;    // chat: {"content": [...]}, completions: {tokens, ...}
    size_t text_offset = 0;
    bool sent_role = false;
    bool echo_pending = false;  // stream mode: the echoed prompt is not sent yet
    size_t prompt_offset = 0;   // echo logprobs: text_offset of the next prompt token
    // Tool calling (null: the request has no tools or tool_choice is none).
    const ToolRequest* tools = nullptr;
    bool tools_decided = false;       // auto: the output turned out to be plain content
    std::string held_for_tools = {};  // text held back while it may still be a tool call
    std::vector<StoredToolCall> tool_calls = {};
    std::string content = {};  // with tool calls: the text outside them
    // return_token_ids: every token counted (token_ids), and those no chunk has carried yet.
    std::vector<int32_t> token_ids = {}, unsent_ids = {};
    double logprob_sum = 0;        // of the counted tokens: best_of ranks by its mean
    bool sent_prompt_ids = false;  // stream, completions: the choice's prompt_token_ids went out
    bool tools_forced() const;
  };
  // Text to stream now: with tools, held back while it may still be a call.
  std::string hold_for_tools(Choice& c, std::string delta);
  // The harmony reader whose addressed messages are the choice's calls (harmony reasoning and
  // tool formats), else null: calls are then never in the content, nothing is held back.
  const HarmonyReader* harmony_calls(const Choice& c) const;
  // Ends a choice: releases held text or turns it into tool calls, sets the finish reason and
  // adds the last chunks (stream mode).
  void end_choice(uint32_t index, std::string reason, std::vector<nlohmann::json>& out);
  nlohmann::json tool_calls_json(const Choice& c, bool streaming) const;
  nlohmann::json legacy_function_call(const Choice& c) const;  // {name, arguments}, the first
  // The choices the response holds, in order: all, or best_of's best per prompt.
  std::vector<uint32_t> returned_choices() const;
  // Stream mode: the echoed prompt (and its logprobs) as the choice's first chunk.
  void emit_echo(uint32_t index, std::vector<nlohmann::json>& out);
  void on_prompt_token(const openai_protocol::PromptTokenMessage& m);
  nlohmann::json tool_calls_delta(uint32_t index);
  nlohmann::json chunk(nlohmann::json choices);
  nlohmann::json choice_delta(uint32_t index, const std::string& text,
                              const nlohmann::json* logprobs, const std::string& finish_reason,
                              const std::string& reasoning = "");
  nlohmann::json usage() const;
  nlohmann::json logprob_entry(int32_t token, double logprob,
                               const std::vector<std::pair<int32_t, double>>& top) const;

  CompletionRequest req_;
  const Tokenizer& tok_;
  std::string id_, model_;
  int64_t created_;
  std::vector<Choice> choices_;
  uint32_t prompt_tokens_ = 0, cached_tokens_ = 0;
  uint64_t accepted_prediction_ = 0, rejected_prediction_ = 0;  // predicted outputs' drafts
  bool sent_prompt_ids_ = false;  // stream, chat: the first chunk carried prompt_token_ids
  bool usage_seen_ = false;       // usage messages (one per prompt) replace the initial count
  bool saw_token_ = false;
  uint64_t token_messages_ = 0;
  std::optional<openai_protocol::ErrorMessage> failure_;
};

}  // namespace pith::server
