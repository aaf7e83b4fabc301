#include "server/responses_request.h"

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "server/openai_api.h"

namespace pith::server {

using ojson = nlohmann::ordered_json;

namespace {

// Every field a Responses request may carry; anything else is refused by name.
constexpr const char* kFields[] = {"model",
                                   "input",
                                   "instructions",
                                   "max_output_tokens",
                                   "temperature",
                                   "top_p",
                                   "stream",
                                   "text",
                                   "tools",
                                   "tool_choice",
                                   "parallel_tool_calls",
                                   "reasoning",
                                   "previous_response_id",
                                   "store",
                                   "metadata",
                                   "user"};

bool known_field(const std::string& key) {
  for (const char* f : kFields)
    if (key == f) return true;
  return false;
}

// A message's content: a string, or input_text / output_text parts.
std::string content_text(const ojson& content, const std::string& param,
                         const char* member = "content") {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    refuse_request(param, "'{}' must be a string or an array of text parts", member);
  std::string out;
  for (const auto& part : content) {
    const std::string type = part.is_object() ? string_or(part, "type") : "";
    if ((type != "input_text" && type != "output_text") || !part.contains("text") ||
        !part["text"].is_string())
      refuse_request(param,
                     "only input_text and output_text content parts are supported by this model{}",
                     type.empty() ? "" : fmt::format(" (got '{}')", type));
    out += part["text"].get<std::string>();
  }
  return out;
}

// An input item's type: "message" when absent, "" (refused as unknown) when not a string.
std::string item_type(const ojson& item) {
  return item.contains("type") ? string_or(item, "type") : "message";
}

std::string string_member(const ojson& item, const char* key, const std::string& param) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string())
    refuse_request(param, "a '{}' item needs a string '{}'", item_type(item), key);
  return it->get<std::string>();
}

// One input item, checked and normalized (the form stored for previous_response_id); null for an
// item that does not reach the model.
ojson normalize_item(const ojson& item, size_t index) {
  const std::string param = fmt::format("input[{}]", index);
  if (!item.is_object()) refuse_request(param, "input items must be objects");
  const std::string type = item_type(item);
  if (type == "message") {
    const std::string role = string_member(item, "role", param);
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      refuse_request(param, "unsupported message role '{}' (user, system, developer or assistant)",
                     role);
    auto c = item.find("content");
    if (c == item.end()) refuse_request(param, "a message item needs 'content'");
    return {{"type", "message"}, {"role", role}, {"content", content_text(*c, param)}};
  }
  if (type == "function_call") {
    ojson out = {{"type", "function_call"},
                 {"call_id", string_member(item, "call_id", param)},
                 {"name", string_member(item, "name", param)},
                 {"arguments", string_member(item, "arguments", param)}};
    return out;
  }
  if (type == "function_call_output") {
    auto o = item.find("output");
    if (o == item.end()) refuse_request(param, "a 'function_call_output' item needs 'output'");
    return {{"type", "function_call_output"},
            {"call_id", string_member(item, "call_id", param)},
            {"output", content_text(*o, param, "output")}};
  }
  // A previous output's reasoning item, sent back as many clients do (input += output): its
  // thoughts are not shown to the model, as chat templates drop them from the history.
  if (type == "reasoning") return nullptr;
  refuse_request(param, "input items of type '{}' are not supported by this server", type);
}

// An output item of a stored response, as the input item the next turn sees (null: none; the
// thoughts of a reasoning item are not shown to the next turn, as chat templates drop them).
ojson input_item_of_output(const ojson& item) {
  const std::string type = item.value("type", "");
  if (type == "reasoning") return nullptr;
  if (type == "message") {
    std::string text;
    for (const auto& part : item.value("content", ojson::array()))
      if (part.value("type", "") == "output_text") text += part.value("text", "");
    return {{"type", "message"}, {"role", "assistant"}, {"content", text}};
  }
  return {{"type", "function_call"},
          {"call_id", item.value("call_id", "")},
          {"name", item.value("name", "")},
          {"arguments", item.value("arguments", "")}};
}

// Items as chat messages: consecutive function calls form one assistant message.
ojson chat_messages(const ojson& items) {
  ojson messages = ojson::array();
  for (const auto& item : items) {
    const std::string type = item["type"];
    if (type == "message") {
      std::string role = item["role"];
      if (role == "developer") role = "system";
      messages.push_back({{"role", role}, {"content", item["content"]}});
    } else if (type == "function_call") {
      ojson call = {{"id", item["call_id"]},
                    {"type", "function"},
                    {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      if (messages.empty() || messages.back()["role"] != "assistant" ||
          !messages.back().contains("tool_calls"))
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {}}});
      messages.back()["tool_calls"].push_back(std::move(call));
    } else {
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", item["output"]}});
    }
  }
  return messages;
}

ojson chat_response_format(const ojson& text) {
  if (!text.is_object()) refuse_request("text", "'text' must be an object");
  for (const auto& [key, value] : text.items())
    if (key != "format") refuse_request("text", "unrecognized 'text' option '{}'", key);
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return nullptr;
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    refuse_request("text.format", "'text.format' must be an object with a 'type'");
  const std::string type = (*f)["type"];
  if (type == "text" || type == "json_object") {
    if (f->size() != 1) refuse_request("text.format", "'{}' format takes no other members", type);
    return {{"type", type}};
  }
  if (type != "json_schema")
    refuse_request("text.format", "unknown text format '{}' (text, json_object or json_schema)",
                   type);
  ojson schema = ojson::object();
  for (const auto& [key, value] : f->items()) {
    if (key == "type") continue;
    if (key != "name" && key != "schema" && key != "strict" && key != "description")
      refuse_request("text.format", "unrecognized json_schema format member '{}'", key);
    schema[key] = value;
  }
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) refuse_request("tools", "'tools' must be an array");
  ojson out = ojson::array();
  for (const auto& t : tools) {
    if (!t.is_object() || string_or(t, "type") != "function")
      refuse_request(
          "tools", "only function tools are supported by this server{}",
          t.is_object() && t.contains("type") ? fmt::format(" (got {})", t["type"].dump()) : "");
    ojson function = ojson::object();
    for (const auto& [key, value] : t.items()) {
      if (key == "type") continue;
      if (key != "name" && key != "description" && key != "parameters" && key != "strict")
        refuse_request("tools", "unrecognized function tool member '{}'", key);
      if (!value.is_null()) function[key] = value;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && string_or(choice, "type") == "function" && choice.contains("name"))
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  refuse_request("tool_choice",
                 "'tool_choice' must be none, auto, required or {{\"type\": \"function\", "
                 "\"name\": ...}}");
}

}  // namespace

void responses_wording(std::string& param, std::string& message) {
  // Longest first: a name that contains another is replaced whole.
  static const std::pair<const char*, const char*> kNames[] = {
      {"response_format.json_schema", "text.format"},
      {"max_completion_tokens", "max_output_tokens"},
      {"response_format", "text.format"},
      {"max_tokens", "max_output_tokens"},
      {"reasoning_effort", "reasoning.effort"},
      {"messages", "input"}};
  for (const auto& [chat, responses] : kNames) {
    for (size_t at = message.find(chat); at != std::string::npos;
         at = message.find(chat, at + std::string_view(responses).size()))
      message.replace(at, std::string_view(chat).size(), responses);
  }
  if (param == "messages") param = "input";
  if (param == "max_tokens" || param == "max_completion_tokens") param = "max_output_tokens";
  if (param == "response_format") param = "text";
  if (param == "reasoning_effort") param = "reasoning";
}

ResponsesRequest translate_responses_request(const ojson& body, const ConversationLookup& lookup) {
  if (!body.is_object()) refuse_request("", "the request body must be a JSON object");
  for (const auto& [key, value] : body.items())
    if (!known_field(key))
      refuse_request(key, "unrecognized request argument '{}' for /v1/responses", key);
  auto field = [&body](const char* key) -> const ojson* {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  ResponsesRequest r;
  ojson chat = ojson::object();
  if (const ojson* m = field("model")) chat["model"] = *m;

  if (const ojson* p = field("previous_response_id")) {
    if (!p->is_string())
      refuse_request("previous_response_id", "'previous_response_id' must be a string");
    std::optional<ojson> before = lookup(p->get<std::string>());
    if (!before)
      throw UnknownResponse(fmt::format("no stored response '{}'", p->get<std::string>()));
    r.input_items = std::move(*before);
  } else {
    r.input_items = ojson::array();
  }
  const ojson* input = field("input");
  if (!input) refuse_request("input", "'input' is required");
  if (input->is_string()) {
    r.input_items.push_back(
        {{"type", "message"}, {"role", "user"}, {"content", input->get<std::string>()}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i)
      if (ojson item = normalize_item((*input)[i], i); !item.is_null())
        r.input_items.push_back(std::move(item));
  } else {
    refuse_request("input", "'input' must be a string or a non-empty array of input items");
  }
  ojson messages = ojson::array();
  if (const ojson* ins = field("instructions")) {
    if (!ins->is_string()) refuse_request("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  for (auto& m : chat_messages(r.input_items)) messages.push_back(std::move(m));
  chat["messages"] = std::move(messages);

  if (const ojson* v = field("max_output_tokens")) chat["max_completion_tokens"] = *v;
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls", "user"})
    if (const ojson* v = field(key)) chat[key] = *v;
  if (const ojson* v = field("stream")) r.stream = v->is_boolean() && v->get<bool>();
  if (const ojson* v = field("store")) {
    if (!v->is_boolean()) refuse_request("store", "'store' must be a boolean");
    r.store = v->get<bool>();
  }
  if (const ojson* v = field("metadata")) {
    if (!v->is_object() || v->size() > 16)
      refuse_request("metadata", "'metadata' must be an object of at most 16 string values");
    for (const auto& [key, value] : v->items())
      if (!value.is_string() || key.size() > 64 || value.get<std::string>().size() > 512)
        refuse_request("metadata",
                       "'metadata' values must be strings (keys up to 64, values up to 512 "
                       "characters)");
  }
  if (const ojson* t = field("text"))
    if (ojson rf = chat_response_format(*t); !rf.is_null()) chat["response_format"] = rf;
  if (const ojson* t = field("tools")) chat["tools"] = chat_tools(*t);
  if (const ojson* c = field("tool_choice")) chat["tool_choice"] = chat_tool_choice(*c);
  // reasoning.effort is chat's reasoning_effort; the thinking comes back whole as reasoning
  // items, so a summary is asked for only as "auto" (whatever the server has).
  if (const ojson* v = field("reasoning")) {
    if (!v->is_object()) refuse_request("reasoning", "'reasoning' must be an object");
    for (const auto& [key, value] : v->items()) {
      if (key == "effort") {
        if (!value.is_null()) chat["reasoning_effort"] = value;
      } else if (key == "summary") {
        if (!value.is_null() && value != "auto")
          refuse_request("reasoning",
                         "'reasoning.summary': only \"auto\" (the reasoning text as written)");
      } else {
        refuse_request("reasoning", "unrecognized field '{}' in 'reasoning'", key);
      }
    }
  }
  r.chat_body = std::move(chat);

  auto echo = [&](const char* key, ojson fallback) {
    const ojson* v = field(key);
    r.echo[key] = v ? *v : std::move(fallback);
  };
  echo("instructions", nullptr);
  echo("max_output_tokens", nullptr);
  echo("temperature", 1.0);
  echo("top_p", 1.0);
  echo("tools", ojson::array());
  echo("tool_choice", "auto");
  echo("parallel_tool_calls", true);
  echo("previous_response_id", nullptr);
  echo("metadata", ojson::object());
  echo("user", nullptr);
  echo("text", {{"format", {{"type", "text"}}}});
  echo("reasoning", {{"effort", nullptr}, {"summary", nullptr}});
  r.echo["store"] = r.store;
  return r;
}

ojson conversation_after(const ojson& input_items, const ojson& output) {
  ojson items = input_items;
  for (const auto& item : output)
    if (ojson in = input_item_of_output(item); !in.is_null()) items.push_back(std::move(in));
  return items;
}

}  // namespace pith::server
