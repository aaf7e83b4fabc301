#include "server/legacy_functions.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "server/openai_api.h"

namespace pith::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

template <typename Json>
bool set(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

// functions -> tools (calls one at a time: the legacy response holds one call).
template <typename Json>
void rewrite_functions(Json& body) {
  if (set(body, "functions")) {
    if (set(body, "tools"))
      refuse_request("functions", "'functions' cannot be combined with 'tools'");
    const Json& functions = body["functions"];
    if (!functions.is_array() || functions.empty())
      refuse_request("functions", "'functions' must be a non-empty array of functions");
    Json tools = Json::array();
    for (const auto& fn : functions) {
      if (!fn.is_object())
        refuse_request("functions", "every function must be an object with a 'name'");
      for (const auto& [key, value] : fn.items())
        if (key != "name" && key != "description" && key != "parameters")
          refuse_request("functions", "unrecognized function field '{}'", key);
      if (string_or(fn, "name").empty())
        refuse_request("functions", "every function needs a non-empty string 'name'");
      if (set(fn, "parameters") && !fn["parameters"].is_object())
        refuse_request("functions", "function '{}': 'parameters' must be an object",
                       fn["name"].template get<std::string>());
      tools.push_back(Json{{"type", "function"}, {"function", fn}});
    }
    body["tools"] = std::move(tools);
    body["parallel_tool_calls"] = false;
  }
  body.erase("functions");
  if (set(body, "function_call")) {
    if (set(body, "tool_choice"))
      refuse_request("function_call", "'function_call' cannot be combined with 'tool_choice'");
    if (!set(body, "tools")) refuse_request("function_call", "'function_call' needs 'functions'");
    const Json& call = body["function_call"];
    Json choice;
    if (call.is_string() && (call == "none" || call == "auto"))
      choice = call;
    else if (call.is_object() && call.size() == 1 && !string_or(call, "name").empty())
      choice = Json{{"type", "function"}, {"function", {{"name", call["name"]}}}};
    else
      refuse_request("function_call",
                     "'function_call' must be \"none\", \"auto\" or {{\"name\": ...}}");
    body["tool_choice"] = std::move(choice);
  }
  body.erase("function_call");
}

// Assistant function_call -> tool_calls with an id; function messages -> tool messages that
// answer the latest call of their function.
template <typename Json>
void rewrite_messages(Json& body) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return;  // parsing reports it
  std::map<std::string, std::string> latest_call;               // function name -> call id
  uint32_t calls = 0;
  for (auto& m : *messages) {
    if (!m.is_object()) continue;
    const std::string role = string_or(m, "role");
    if (set(m, "function_call")) {
      if (role != "assistant")
        refuse_request("messages", "'function_call' is allowed on assistant messages only");
      if (set(m, "tool_calls"))
        refuse_request("messages",
                       "an assistant message cannot have both 'function_call' and 'tool_calls'");
      const Json& call = m["function_call"];
      const std::string name = call.is_object() ? string_or(call, "name") : "";
      if (name.empty())
        refuse_request("messages", "a message's 'function_call' needs a non-empty 'name'");
      Json function = {{"name", name}};
      if (set(call, "arguments")) function["arguments"] = call["arguments"];
      const std::string id = fmt::format("call_legacy_{}", calls++);
      latest_call[name] = id;
      m["tool_calls"] =
          Json::array({Json{{"id", id}, {"type", "function"}, {"function", function}}});
    }
    m.erase("function_call");
    if (role == "function") {
      const std::string name = string_or(m, "name");
      if (name.empty())
        refuse_request("messages", "a 'function' message needs the function's 'name'");
      m["role"] = "tool";
      if (auto it = latest_call.find(name); it != latest_call.end()) m["tool_call_id"] = it->second;
    }
  }
}

}  // namespace

bool uses_legacy_functions(const json& body) {
  if (!body.is_object()) return false;
  if (set(body, "functions") || set(body, "function_call")) return true;
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return false;
  for (const auto& m : *messages)
    if (m.is_object() && (set(m, "function_call") || string_or(m, "role") == "function"))
      return true;
  return false;
}

void legacy_functions_as_tools(json& body, ordered_json& ordered) {
  rewrite_functions(body);
  rewrite_messages(body);
  rewrite_functions(ordered);
  rewrite_messages(ordered);
}

}  // namespace pith::server
