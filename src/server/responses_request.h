// OpenAI's Responses API (POST /v1/responses) on the chat machinery: a Responses request is
// validated and translated into the equivalent chat completions body, which
// parse_completion_request (openai_api.h) turns into the built-in inferlet's CompletionRequest.
//   input (string | items) + instructions  -> messages (function_call / function_call_output
//                                             items become assistant tool_calls / tool messages)
//   text.format                            -> response_format
//   tools (flat function tools)            -> tools ({"type": "function", "function": {...}})
//   max_output_tokens                      -> max_completion_tokens
// previous_response_id puts the stored conversation (its input and output items) in front.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace pith::server {

// The stored conversation a request continues: every input item that led to the response, then
// the response's output items.
using ConversationLookup =
    std::function<std::optional<nlohmann::ordered_json>(const std::string& response_id)>;

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;    // the chat completions request it amounts to
  nlohmann::ordered_json input_items;  // the whole conversation's input, as items
  bool stream = false;
  bool store = true;
  // Echoed in the response object.
  nlohmann::ordered_json echo;  // instructions, max_output_tokens, temperature, top_p, tools, ...
};

// Throws InvalidRequest naming the Responses field at fault; an unknown previous_response_id
// throws UnknownResponse.
ResponsesRequest translate_responses_request(const nlohmann::ordered_json& body,
                                             const ConversationLookup& lookup);

class UnknownResponse : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What previous_response_id continues from: the response's input items, then its output items
// as input items (messages and function calls).
nlohmann::ordered_json conversation_after(const nlohmann::ordered_json& input_items,
                                          const nlohmann::ordered_json& output);

// An error parse_completion_request found in the translated chat body, in the Responses
// request's own terms: the field at fault (messages -> input, max_completion_tokens ->
// max_output_tokens, response_format -> text) and the names in the message.
void responses_wording(std::string& param, std::string& message);

}  // namespace pith::server
