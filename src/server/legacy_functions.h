// OpenAI's deprecated function calling, which older clients and agent frameworks still send:
// `functions` (name, description, parameters) and `function_call` (none, auto or {"name": ...})
// on the request, assistant messages with one `function_call` {name, arguments}, and `function`
// messages carrying a call's result. pith serves it through tool calling (tool_calls.h): the
// request is rewritten in those terms (one call per turn, as the legacy API returns) and the
// response names the call as `message.function_call` with finish_reason "function_call".
#pragma once

#include <nlohmann/json.hpp>

namespace pith::server {

// Whether a chat request uses any of the legacy fields (in its messages too).
bool uses_legacy_functions(const nlohmann::json& body);

// Rewrites the legacy fields of `body` as tools, tool_choice, parallel_tool_calls = false,
// assistant tool_calls and tool messages (ids call_legacy_K pairing each function message
// with the latest call of that name); `ordered` (the same body, members in the order sent) the
// same way. Throws InvalidRequest naming functions / function_call / messages for a malformed
// legacy field or one mixed with its modern counterpart.
void legacy_functions_as_tools(nlohmann::json& body, nlohmann::ordered_json& ordered);

}  // namespace pith::server
