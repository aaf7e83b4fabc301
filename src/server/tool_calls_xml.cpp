// The XML tool-call format of Qwen3-Coder and Qwen3.5 (vLLM's --tool-call-parser qwen3_coder):
//   <tool_call>
//   <function=NAME>
//   <parameter=ARG>
//   VALUE
//   </parameter>
//   </function>
//   </tool_call>
// A value is raw text: strings are written as they are, everything else as JSON (the template
// serializes objects and arrays with tojson, numbers and booleans as their text). Parsing turns
// each value back by the parameter's schema; the grammar of a forced call writes string
// parameters as text without "</" and the others as JSON that satisfies their schema.
#include <fmt/format.h>

#include "server/tool_calls.h"

namespace pith::server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

// Whether a parameter's value is written as plain text: its schema admits strings only.
bool text_valued(const ordered_json& schema) {
  if (!schema.is_object()) return false;
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty()) {
    for (const auto& v : *e)
      if (!v.is_string()) return false;
    return true;
  }
  if (auto c = schema.find("const"); c != schema.end()) return c->is_string();
  auto t = schema.find("type");
  return t != schema.end() && t->is_string() && t->get<std::string>() == "string";
}

const ordered_json* parameter_schema(const ToolFunction& fn, const std::string& name) {
  auto props = fn.parameters.find("properties");
  if (props == fn.parameters.end() || !props->is_object()) return nullptr;
  auto p = props->find(name);
  return p == props->end() ? nullptr : &*p;
}

// One value as the model wrote it, back to JSON: text for string parameters, else JSON when it
// parses (a number, a boolean, an object), else the text.
ordered_json value_of(std::string_view raw, const ordered_json* schema) {
  if (!raw.empty() && raw.front() == '\n') raw.remove_prefix(1);
  if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
  if (schema && text_valued(*schema)) return std::string(raw);
  ordered_json j = ordered_json::parse(trim_space(raw), nullptr, false);
  if (!j.is_discarded()) return j;
  return std::string(raw);
}

// The call in `body` (between <tool_call> and </tool_call>), if it is one to a known function.
std::optional<ToolCall> xml_call(std::string_view body, const ToolRequest& r) {
  body = trim_space(body);
  if (body.substr(0, kFunction.size()) != kFunction) return std::nullopt;
  const size_t name_end = body.find('>');
  const size_t fn_end = body.rfind(kFunctionEnd);
  if (name_end == std::string_view::npos || fn_end == std::string_view::npos || fn_end < name_end)
    return std::nullopt;
  const std::string name(trim_space(body.substr(kFunction.size(), name_end - kFunction.size())));
  const ToolFunction* fn = nullptr;
  for (const auto& f : r.functions)
    if (f.name == name) fn = &f;
  if (!fn) return std::nullopt;
  ordered_json args = ordered_json::object();
  std::string_view rest = body.substr(name_end + 1, fn_end - name_end - 1);
  for (;;) {
    rest = trim_space(rest);
    if (rest.empty()) break;
    if (rest.substr(0, kParameter.size()) != kParameter) return std::nullopt;
    const size_t key_end = rest.find('>');
    const size_t value_end = rest.find(kParameterEnd);
    if (key_end == std::string_view::npos || value_end == std::string_view::npos ||
        value_end < key_end)
      return std::nullopt;
    const std::string key(trim_space(rest.substr(kParameter.size(), key_end - kParameter.size())));
    args[key] =
        value_of(rest.substr(key_end + 1, value_end - key_end - 1), parameter_schema(*fn, key));
    rest = rest.substr(value_end + kParameterEnd.size());
  }
  return ToolCall{name, args.dump()};
}

}  // namespace

ParsedToolOutput parse_xml_tool_output(std::string_view text, const ToolRequest& r) {
  return parse_tool_call_blocks(text, "<tool_call>", "</tool_call>",
                                [&](std::string_view body) { return xml_call(body, r); });
}

std::string xml_tool_call_grammar(const ToolRequest& r, int max_calls) {
  // Non-text parameters become $defs of one schema, so that their JSON grammars share one rule
  // namespace: the converter names the rule of "#/$defs/vN" def-vN.
  ordered_json defs = ordered_json::object();
  std::vector<std::string> calls;
  std::string rules;
  for (const auto& fn : r.functions) {
    if (r.choice == ToolRequest::Choice::Named && fn.name != r.named) continue;
    const std::string call_rule = fmt::format("call-{}", calls.size());
    std::string body = gbnf_literal("<function=" + fn.name + ">\n");
    std::vector<std::string> required;
    if (auto req = fn.parameters.find("required"); req != fn.parameters.end() && req->is_array())
      for (const auto& n : *req)
        if (n.is_string()) required.push_back(n.get<std::string>());
    if (auto props = fn.parameters.find("properties");
        props != fn.parameters.end() && props->is_object())
      for (const auto& [key, schema] : props->items()) {
        std::string value;
        if (text_valued(schema) && schema.contains("enum")) {
          for (const auto& v : schema["enum"])
            value += (value.empty() ? "(" : " | ") + gbnf_literal(v.get<std::string>());
          value += ")";
        } else if (text_valued(schema) && schema.contains("const")) {
          value = gbnf_literal(schema["const"].get<std::string>());
        } else if (text_valued(schema)) {
          value = "xml-text";
        } else {
          const std::string def = fmt::format("v{}", defs.size());
          defs[def] = schema;
          value = "def-" + def;
        }
        const std::string param = gbnf_literal("<parameter=" + key + ">\n") + " " + value + " " +
                                  gbnf_literal("\n</parameter>\n");
        const bool must = std::find(required.begin(), required.end(), key) != required.end();
        body += " " + (must ? param : "(" + param + ")?");
      }
    body += " " + gbnf_literal("</function>");
    rules += fmt::format("{} ::= {}\n", call_rule, body);
    calls.push_back(call_rule);
  }
  const std::string values = schema_definition_rules(defs, ValueSyntax::Json);
  std::string any;
  for (const auto& c : calls) any += (any.empty() ? "" : " | ") + c;
  return fmt::format(
      "root ::= tool-call-block{}\n"
      "tool-call-block ::= \"<tool_call>\\n\" ({}) \"\\n</tool_call>\"\n"
      "xml-text ::= ([^<] | \"<\" [^/])*\n{}{}",
      max_calls > 1 ? fmt::format(" (\"\\n\" tool-call-block){{0,{}}}", max_calls - 1) : "", any,
      rules, values);
}

}  // namespace pith::server
