// gpt-oss's tool calls (harmony, see harmony.h): a call is a message addressed to the function,
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{ARGUMENTS}<|call|>
// (or " to=functions.NAME" before <|channel|>, as its template writes calls back), and ends
// generation: one call per turn, whatever parallel_tool_calls says. The forced-call and
// response_format grammars let the model reason first (one analysis message) and then write
// the call's header and its arguments to the function's schema, or the final message's JSON.
//
// gpt-oss's template reads a thought as `thinking` and one call per assistant message (the
// first): harmony_turns renames reasoning_content and splits a message with several calls into
// one message per call, each followed by its result.
#include <fmt/format.h>

#include <algorithm>

#include "server/harmony.h"
#include "server/openai_api.h"
#include "server/tool_calls.h"

namespace pith::server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kFunctions = "functions.";

// The optional thought before a forced answer: one analysis message. Its text holds no "<|"
// (which would start a marker), so <|end|> closes it.
constexpr std::string_view kThoughtRules =
    "harmony-thought ::= \"<|channel|>analysis<|message|>\" harmony-thought-text "
    "\"<|end|><|start|>assistant\"\n"
    "harmony-thought-text ::= ([^<] | \"<\" [^|])*\n";

}  // namespace

bool is_harmony_template(std::string_view source) {
  return source.find("<|channel|>") != std::string_view::npos &&
         source.find("<|call|>") != std::string_view::npos;
}

ParsedToolOutput harmony_tool_calls(const std::vector<HarmonyReader::Addressed>& addressed,
                                    const ToolRequest* request) {
  ParsedToolOutput out;
  for (const HarmonyReader::Addressed& m : addressed) {
    std::optional<ToolCall> call;
    if (request && request->active() && m.recipient.starts_with(kFunctions)) {
      const std::string name = m.recipient.substr(kFunctions.size());
      const bool known = std::any_of(request->functions.begin(), request->functions.end(),
                                     [&](const ToolFunction& f) { return f.name == name; });
      ordered_json args = ordered_json::parse(m.body, nullptr, false);
      if (known && args.is_object()) call = ToolCall{name, args.dump()};
    }
    if (call) {
      out.calls.push_back(std::move(*call));
    } else if (!trim_space(m.body).empty()) {  // not a call the request allows: its text stays
      if (!out.content.empty()) out.content += "\n\n";
      out.content += trim_space(m.body);
    }
  }
  return out;
}

ParsedToolOutput parse_harmony_tool_output(std::string_view text, const ToolRequest& request) {
  HarmonyReader reader;
  HarmonyReader::Delta read = reader.push(text);
  const HarmonyReader::Delta last = reader.finish();
  ParsedToolOutput out = harmony_tool_calls(reader.addressed(), &request);
  if (out.calls.empty()) {
    out.content = std::string(text);
    return out;
  }
  std::string content = read.content + last.content;
  if (!out.content.empty()) content += (content.empty() ? "" : "\n\n") + out.content;
  out.content = std::string(trim_space(content));
  return out;
}

std::string harmony_tool_call_grammar(const ToolRequest& r) {
  const auto [calls, rules] =
      forced_call_rules(r, "\" <|constrain|>json<|message|>\"", ValueSyntax::Json);
  return fmt::format("root ::= harmony-thought? \"<|channel|>commentary to=functions.\" ({})\n{}{}",
                     calls, kThoughtRules, rules);
}

std::string harmony_answer_grammar(std::string gbnf) {
  constexpr std::string_view kRoot = "root ::= ";
  if (!gbnf.starts_with(kRoot)) throw InvalidRequest("response_format", "internal: no root rule");
  gbnf.replace(0, kRoot.size(), "harmony-answer ::= ");
  return fmt::format(
      "root ::= harmony-thought? \"<|channel|>final<|message|>\" harmony-answer\n{}{}",
      kThoughtRules, gbnf);
}

ordered_json harmony_turns(const ordered_json& messages) {
  ordered_json out = ordered_json::array();
  auto role_of = [](const ordered_json& m) { return m.value("role", std::string()); };
  for (size_t i = 0; i < messages.size();) {
    ordered_json m = messages[i++];
    if (role_of(m) != "assistant") {
      out.push_back(std::move(m));
      continue;
    }
    if (auto r = m.find("reasoning_content"); r != m.end()) {
      if (!m.contains("thinking")) m["thinking"] = *r;
      m.erase("reasoning_content");
    }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array() || calls->empty()) {
      out.push_back(std::move(m));
      continue;
    }
    // The template refuses a call message with both a thought and text: the thought is what
    // the model continues from, the text was a preamble already shown.
    if (m.contains("thinking") && m["thinking"].is_string() && !m["thinking"].empty())
      m["content"] = "";
    // The results that follow, matched to their calls by id (else in order).
    const ordered_json list = *calls;
    std::vector<ordered_json> results;
    for (; i < messages.size() && role_of(messages[i]) == "tool"; ++i)
      results.push_back(messages[i]);
    std::vector<bool> used(results.size(), false);
    for (size_t k = 0; k < list.size(); ++k) {
      ordered_json turn = m;
      turn["tool_calls"] = ordered_json::array({list[k]});
      if (k > 0) turn.erase("thinking"), turn["content"] = "";
      out.push_back(std::move(turn));
      const std::string id = list[k].value("id", std::string());
      size_t match = results.size();
      for (size_t j = 0; j < results.size() && match == results.size(); ++j)
        if (!used[j] && !id.empty() && results[j].value("tool_call_id", std::string()) == id)
          match = j;
      for (size_t j = 0; j < results.size() && match == results.size(); ++j)
        if (!used[j]) match = j;
      if (match < results.size()) {
        used[match] = true;
        out.push_back(results[match]);
      }
    }
    for (size_t j = 0; j < results.size(); ++j)
      if (!used[j]) out.push_back(results[j]);
  }
  return out;
}

}  // namespace pith::server
