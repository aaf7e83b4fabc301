#include "server/tool_calls.h"

#include <fmt/format.h>

#include "server/json_schema_grammar.h"
#include "server/openai_api.h"

namespace pith::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kGemma4Open = "<|tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
// A bound on calls per turn, so a grammar-forced output always ends.
constexpr int kMaxParallelCalls = 8;

// The key a format's call object holds the arguments under.
const char* arguments_key(ToolCallFormat f) {
  return f == ToolCallFormat::Hermes ? "arguments" : "parameters";
}

// One call as the model writes it: {"name": NAME, ARGS_KEY: {...}}, as a JSON Schema.
ordered_json call_schema(const ToolFunction& fn, ToolCallFormat f) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", fn.name}}}, {arguments_key(f), fn.parameters}}},
          {"required", {"name", arguments_key(f)}},
          {"additionalProperties", false}};
}

const ToolFunction* find_function(const ToolRequest& r, const std::string& name) {
  for (const auto& fn : r.functions)
    if (fn.name == name) return &fn;
  return nullptr;
}

// A call object parsed from the output, if it names a known function and has object arguments.
std::optional<ToolCall> call_of(std::string_view text, ToolCallFormat f, const ToolRequest& r) {
  ordered_json j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  // Llama 3 models write "parameters" as asked, and sometimes "arguments": accept both.
  auto args = j.find(arguments_key(f));
  if (args == j.end()) args = j.find(f == ToolCallFormat::Hermes ? "parameters" : "arguments");
  if (args == j.end() || !args->is_object()) return std::nullopt;
  std::string n = name->get<std::string>();
  if (!find_function(r, n)) return std::nullopt;
  return ToolCall{std::move(n), args->dump()};
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes:
      return "hermes";
    case ToolCallFormat::Llama3Json:
      return "llama3_json";
    case ToolCallFormat::Qwen3Coder:
      return "qwen3_coder";
    case ToolCallFormat::Gemma4:
      return "gemma4";
    case ToolCallFormat::Mistral:
      return "mistral";
    case ToolCallFormat::Harmony:
      return "harmony";
  }
  return "?";
}

std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::Hermes;
  if (name == "llama3_json") return ToolCallFormat::Llama3Json;
  if (name == "qwen3_coder") return ToolCallFormat::Qwen3Coder;
  if (name == "gemma4") return ToolCallFormat::Gemma4;
  if (name == "mistral") return ToolCallFormat::Mistral;
  if (name == "harmony" || name == "openai") return ToolCallFormat::Harmony;
  return std::nullopt;
}

ToolCallFormat detect_tool_call_format(const std::string& source) {
  if (is_harmony_template(source)) return ToolCallFormat::Harmony;
  if (source.find("'<|tool_call>call:'") != std::string::npos) return ToolCallFormat::Gemma4;
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::Mistral;
  if (source.find("<function=") != std::string::npos &&
      source.find("<parameter=") != std::string::npos)
    return ToolCallFormat::Qwen3Coder;
  if (source.find(kHermesOpen) != std::string::npos) return ToolCallFormat::Hermes;
  if (source.find("\"parameters\"") != std::string::npos &&
      source.find("ipython") != std::string::npos)
    return ToolCallFormat::Llama3Json;
  return ToolCallFormat::Hermes;
}

ToolRequest parse_tool_request(const json& body, const ordered_json* ordered) {
  ToolRequest r;
  const ordered_json tools_ordered = ordered && ordered->contains("tools") ? (*ordered)["tools"]
                                     : body.contains("tools") ? ordered_json(body["tools"])
                                                              : ordered_json();
  if (!tools_ordered.is_null()) {
    if (!tools_ordered.is_array()) refuse_request("tools", "'tools' must be an array");
    if (tools_ordered.size() > 128) refuse_request("tools", "at most 128 tools");
    for (const auto& t : tools_ordered) {
      if (!t.is_object() || string_or(t, "type") != "function")
        refuse_request("tools",
                       "every tool needs \"type\": \"function\" (the only type supported)");
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object())
        refuse_request("tools", "every tool needs a 'function' object");
      for (const auto& [key, value] : fn->items())
        if (key != "name" && key != "description" && key != "parameters" && key != "strict")
          refuse_request("tools", "unrecognized function field '{}'", key);
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
        refuse_request("tools", "every function needs a non-empty 'name'");
      ToolFunction f{name->get<std::string>(), ordered_json{{"type", "object"}}};
      if (find_function(r, f.name))
        refuse_request("tools", "function '{}' is declared twice", f.name);
      if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
        if (!p->is_object())
          refuse_request("tools", "function '{}': 'parameters' must be an object", f.name);
        f.parameters = *p;
      }
      r.functions.push_back(std::move(f));
    }
    r.template_tools = tools_ordered;
  }
  const bool have_tools = !r.functions.empty();
  r.choice = have_tools ? ToolRequest::Choice::Auto : ToolRequest::Choice::None;
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v == "none")
        r.choice = ToolRequest::Choice::None;
      else if (v == "auto")
        r.choice = ToolRequest::Choice::Auto;
      else if (v == "required")
        r.choice = ToolRequest::Choice::Required;
      else
        refuse_request("tool_choice", "'tool_choice' must be none, auto, required or a function");
    } else if (c->is_object() && string_or(*c, "type") == "function" && c->contains("function") &&
               (*c)["function"].is_object() && (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      r.choice = ToolRequest::Choice::Named;
      r.named = (*c)["function"]["name"].get<std::string>();
      if (!find_function(r, r.named))
        refuse_request("tool_choice",
                       "'tool_choice' names function '{}', which 'tools' does not declare",
                       r.named);
    } else {
      refuse_request("tool_choice",
                     "'tool_choice' must be none, auto, required or {{\"type\": \"function\", "
                     "\"function\": {{\"name\": ...}}}}");
    }
    if (r.choice != ToolRequest::Choice::None && !have_tools)
      refuse_request("tool_choice", "'tool_choice' needs 'tools'");
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean())
      refuse_request("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.parallel = p->get<bool>();
  }
  return r;
}

std::string tool_call_grammar(const ToolRequest& r, ToolCallFormat f) {
  const bool many = r.parallel && r.choice == ToolRequest::Choice::Required;
  if (f == ToolCallFormat::Qwen3Coder)
    return xml_tool_call_grammar(r, many ? kMaxParallelCalls : 1);
  if (f == ToolCallFormat::Gemma4) return gemma4_tool_call_grammar(r, many ? kMaxParallelCalls : 1);
  if (f == ToolCallFormat::Mistral)
    return mistral_tool_call_grammar(r, many ? kMaxParallelCalls : 1);
  if (f == ToolCallFormat::Harmony) return harmony_tool_call_grammar(r);
  ordered_json schema;
  if (r.choice == ToolRequest::Choice::Named) {
    schema = call_schema(*find_function(r, r.named), f);
  } else {
    ordered_json any = ordered_json::array();
    for (const auto& fn : r.functions) any.push_back(call_schema(fn, f));
    schema = any.size() == 1 ? any[0] : ordered_json{{"anyOf", any}};
  }
  std::string call;
  try {
    call = json_schema_to_gbnf(schema).gbnf;
  } catch (const std::exception& e) {
    refuse_request("tools", "{}", e.what());
  }
  // The converter's start rule becomes one call; the format wraps it.
  constexpr std::string_view kRoot = "root ::= ";
  if (call.compare(0, kRoot.size(), kRoot) != 0)
    refuse_request("tools", "internal: unexpected grammar");
  call.replace(0, kRoot.size(), "tool-call-object ::= ");
  if (f == ToolCallFormat::Llama3Json) return "root ::= tool-call-object\n" + call;
  const std::string block = R"("<tool_call>\n" tool-call-object "\n</tool_call>")";
  return fmt::format(
      "root ::= tool-call-block{}\ntool-call-block ::= {}\n{}",
      many ? fmt::format(" (\"\\n\" tool-call-block){{0,{}}}", kMaxParallelCalls - 1) : "", block,
      call);
}

ParsedToolOutput parse_tool_output(std::string_view text, ToolCallFormat f, const ToolRequest& r) {
  if (f == ToolCallFormat::Qwen3Coder) return parse_xml_tool_output(text, r);
  if (f == ToolCallFormat::Gemma4) return parse_gemma4_tool_output(text, r);
  if (f == ToolCallFormat::Mistral) return parse_mistral_tool_output(text, r);
  if (f == ToolCallFormat::Harmony) return parse_harmony_tool_output(text, r);
  ParsedToolOutput out;
  if (f == ToolCallFormat::Llama3Json) {
    std::string_view body = trim_space(text);
    if (body.substr(0, kPythonTag.size()) == kPythonTag)
      body = trim_space(body.substr(kPythonTag.size()));
    if (auto call = call_of(body, f, r)) {
      out.calls.push_back(std::move(*call));
      return out;
    }
    out.content = std::string(text);
    return out;
  }
  return parse_tool_call_blocks(text, kHermesOpen, kHermesClose, [&](std::string_view body) {
    return call_of(trim_space(body), f, r);
  });
}

ParsedToolOutput parse_tool_call_blocks(
    std::string_view text, std::string_view open_tag, std::string_view close_tag,
    const std::function<std::optional<ToolCall>(std::string_view)>& call_of) {
  ParsedToolOutput out;
  std::string content;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(open_tag, at);
    if (open == std::string_view::npos) break;
    const size_t start = open + open_tag.size();
    const size_t close = text.find(close_tag, start);
    const size_t end = close == std::string_view::npos ? text.size() : close;
    auto call = call_of(text.substr(start, end - start));
    if (!call) break;  // text that only looks like a call: the rest stays content
    content += text.substr(at, open - at);
    out.calls.push_back(std::move(*call));
    at = close == std::string_view::npos ? text.size() : close + close_tag.size();
  }
  if (out.calls.empty()) {
    out.content = std::string(text);
    return out;
  }
  content += text.substr(at);
  out.content = std::string(trim_space(content));
  return out;
}

bool may_become_tool_call(std::string_view text, ToolCallFormat f) {
  const std::string_view t = trim_space(text);
  if (t.empty()) return true;
  auto prefix_of = [&](std::string_view marker) {
    return marker.substr(0, std::min(marker.size(), t.size())) == t.substr(0, marker.size());
  };
  if (f == ToolCallFormat::Gemma4) return prefix_of(kGemma4Open);
  if (f == ToolCallFormat::Mistral) return may_become_mistral_tool_call(t);
  // A harmony call ends the turn, after any other messages; a final message ends it too.
  if (f == ToolCallFormat::Harmony) return t.find("<|channel|>final") == std::string_view::npos;
  if (f != ToolCallFormat::Llama3Json) return prefix_of(kHermesOpen);
  return t.front() == '{' || prefix_of(kPythonTag);
}

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string schema_definition_rules(const nlohmann::ordered_json& defs, ValueSyntax syntax) {
  if (defs.empty()) return "";
  nlohmann::ordered_json refs = nlohmann::ordered_json::array();
  for (const auto& [name, schema] : defs.items()) refs.push_back({{"$ref", "#/$defs/" + name}});
  const nlohmann::ordered_json schema = {{"$defs", defs}, {"anyOf", refs}};
  std::string rules;
  try {
    rules = json_schema_to_gbnf(schema, syntax).gbnf;
  } catch (const std::exception& e) {
    throw InvalidRequest("tools", e.what());
  }
  // Only the definitions are used; the converter's root (their union) is dropped.
  const size_t root_end = rules.find('\n');
  if (rules.compare(0, 5, "root ") != 0 || root_end == std::string::npos)
    throw InvalidRequest("tools", "internal: unexpected grammar");
  return rules.erase(0, root_end + 1);
}

ForcedCallRules forced_call_rules(const ToolRequest& r, std::string_view between,
                                  ValueSyntax syntax) {
  ordered_json defs = ordered_json::object();
  ForcedCallRules out;
  for (const auto& fn : r.functions) {
    if (r.choice == ToolRequest::Choice::Named && fn.name != r.named) continue;
    const std::string def = fmt::format("v{}", defs.size());
    defs[def] = fn.parameters.is_object() && !fn.parameters.empty()
                    ? fn.parameters
                    : ordered_json{{"type", "object"}};
    out.alternatives +=
        fmt::format("{}{}{}{} def-{}", out.alternatives.empty() ? "" : " | ", gbnf_literal(fn.name),
                    between.empty() ? "" : " ", between, def);
  }
  out.rules = schema_definition_rules(defs, syntax);
  return out;
}

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

ordered_json template_message(const json& m) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
    refuse_request("messages", "every message needs a string 'role'");
  const std::string role = m["role"].get<std::string>();
  ordered_json out = {{"role", role}, {"content", message_text(m)}};
  if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
    if (role != "assistant" || !calls->is_array())
      refuse_request("messages", "'tool_calls' must be an array on an assistant message");
    ordered_json list = ordered_json::array();
    for (const auto& c : *calls) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].contains("name") || !c["function"]["name"].is_string())
        refuse_request("messages", "every tool call needs a function with a name");
      const json& fn = c["function"];
      ordered_json args = ordered_json::object();
      if (auto a = fn.find("arguments"); a != fn.end() && !a->is_null()) {
        // OpenAI sends arguments as a JSON string; templates want the object.
        args = a->is_string() ? ordered_json::parse(a->get<std::string>(), nullptr, false)
                              : ordered_json(*a);
        if (args.is_discarded())
          refuse_request("messages", "tool call arguments of '{}' are not valid JSON",
                         fn["name"].get<std::string>());
      }
      ordered_json call = {{"type", "function"},
                           {"function", {{"name", fn["name"]}, {"arguments", std::move(args)}}}};
      if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
      list.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(list);
  }
  if (role == "tool") {
    if (auto id = m.find("tool_call_id"); id != m.end() && id->is_string())
      out["tool_call_id"] = *id;
  }
  if (auto name = m.find("name"); name != m.end() && name->is_string()) out["name"] = *name;
  // The thinking behind earlier calls: Gemma 4's and Qwen3.5's templates show it again.
  if (auto r = m.find("reasoning_content"); role == "assistant" && r != m.end() && r->is_string())
    out["reasoning_content"] = *r;
  return out;
}

}  // namespace pith::server
