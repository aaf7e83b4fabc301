// A Responses API response object and its stream events, built from what CompletionSession
// produces for the equivalent chat request: the chat chunks of a stream become
// response.output_item.added / content_part.added / output_text.delta / ... events, the chat
// completion becomes the output items (a `reasoning` item with the model's thoughts when the
// served model thinks, a `message` with `output_text`, then `function_call`s).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pith::server {

struct ResponsesUsage {
  uint32_t input_tokens = 0, cached_tokens = 0, output_tokens = 0;
};

class ResponseBuilder {
 public:
  // `echo`: the request's fields the response object repeats (ResponsesRequest::echo).
  ResponseBuilder(std::string id, std::string model, int64_t created_at,
                  nlohmann::ordered_json echo);

  const std::string& id() const { return id_; }

  // Streaming: response.created and response.in_progress.
  std::vector<nlohmann::ordered_json> start();
  // One chat completion chunk as the events it amounts to.
  std::vector<nlohmann::ordered_json> on_chunk(const nlohmann::json& chunk);
  // Streaming, after the last chunk: closes the open items, then response.completed (or
  // response.incomplete).
  std::vector<nlohmann::ordered_json> finish(const ResponsesUsage& usage);

  // Streaming, when generation failed: response.failed with the error.
  std::vector<nlohmann::ordered_json> fail(const std::string& message);

  // Not streaming: the output items of a chat completion (its first choice).
  void set_chat_completion(const nlohmann::json& completion, const ResponsesUsage& usage);

  // The response object (status "in_progress" until finished).
  nlohmann::ordered_json response() const;
  const nlohmann::ordered_json& output() const { return output_; }

 private:
  nlohmann::ordered_json event(const char* type, nlohmann::ordered_json fields);
  void text_delta(const std::string& delta, std::vector<nlohmann::ordered_json>& out);
  void open_message(std::vector<nlohmann::ordered_json>& out);
  void close_message(std::vector<nlohmann::ordered_json>& out);
  void reasoning_delta(const std::string& delta, std::vector<nlohmann::ordered_json>& out);
  void close_reasoning(std::vector<nlohmann::ordered_json>& out);
  void add_function_call(const nlohmann::json& call, std::vector<nlohmann::ordered_json>* out);
  const char* item_status() const { return incomplete_ ? "incomplete" : "completed"; }

  std::string id_, model_;
  int64_t created_at_;
  nlohmann::ordered_json echo_;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
  uint64_t sequence_ = 0;
  int message_index_ = -1;    // the message item in output_ while it is open
  std::string text_;          // the open message's text
  int reasoning_index_ = -1;  // the reasoning item in output_ while it is open
  std::string reasoning_;     // its text
  bool saw_message_ = false;
  bool finished_ = false, incomplete_ = false, saw_tool_calls_ = false;
  std::string error_;  // set by fail()
  ResponsesUsage usage_;
};

// One event as Server-Sent Events text ("event: TYPE\ndata: JSON\n\n").
std::string sse_event(const nlohmann::ordered_json& event);

}  // namespace pith::server
