// Mistral's tool-call format (what its chat templates write and vLLM's and llama.cpp's Mistral
// parsers read), in two generations:
//   [TOOL_CALLS][{"name": NAME, "arguments": {...}}, ...]   Mistral 7B v0.3, NeMo, Small 3.0/3.1
//   [TOOL_CALLS]NAME[ARGS]{...}[TOOL_CALLS]NAME[ARGS]{...}  Small 3.2, Magistral, Devstral
// (a [CALL_ID]ID may sit between the name and [ARGS]). [TOOL_CALLS], [ARGS] and [CALL_ID] are
// control tokens, which the text of a choice leaves out: with this format the session keeps
// their text (mistral_kept_tokens) so that the parser sees where calls begin. Grammars never
// produce control tokens, so a forced call is the bare JSON array of the first form, which the
// parser also reads. Mistral's templates accept only tool-call ids of 9 letters and digits:
// calls get such ids, and a conversation's other ids are mapped onto them (the same id always
// to the same 9 characters, so each result still answers its call).
#include <fmt/format.h>

#include <cctype>
#include <random>

#include "server/openai_api.h"
#include "server/tool_calls.h"

namespace pith::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr std::string_view kCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

const ToolFunction* find_function(const ToolRequest& r, std::string_view name) {
  for (const auto& fn : r.functions)
    if (fn.name == name) return &fn;
  return nullptr;
}

// The longest prefix of `text` that is one JSON value ending in `last` ('}' or ']'), parsed;
// discarded when there is none. Models may write text after a call (or end mid-way).
ordered_json leading_json(std::string_view text, char last) {
  for (size_t end = text.rfind(last); end != std::string_view::npos;
       end = end == 0 ? std::string_view::npos : text.rfind(last, end - 1)) {
    ordered_json j = ordered_json::parse(text.substr(0, end + 1), nullptr, false);
    if (!j.is_discarded()) return j;
  }
  return ordered_json(ordered_json::value_t::discarded);
}

// A call from its name and arguments (an object, or a string holding one) if the function is
// declared.
std::optional<ToolCall> call_of(std::string_view name, const ordered_json& args,
                                const ToolRequest& r) {
  if (!find_function(r, name)) return std::nullopt;
  ordered_json a =
      args.is_string() ? ordered_json::parse(args.get<std::string>(), nullptr, false) : args;
  if (!a.is_object()) return std::nullopt;
  return ToolCall{std::string(name), a.dump()};
}

// [{"name": ..., "arguments": {...}}, ...]: every element a declared call, else nothing.
std::optional<std::vector<ToolCall>> array_calls(std::string_view text, const ToolRequest& r) {
  ordered_json list = leading_json(text, ']');
  if (!list.is_array() || list.empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string())
      return std::nullopt;
    auto args = item.find("arguments");
    if (args == item.end()) args = item.find("parameters");
    auto call = call_of(item["name"].get<std::string>(),
                        args == item.end() ? ordered_json::object() : *args, r);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

// NAME[ARGS]{...} (or NAME[CALL_ID]ID[ARGS]{...}) blocks, one after each [TOOL_CALLS].
std::optional<std::vector<ToolCall>> named_calls(std::string_view text, const ToolRequest& r) {
  std::vector<ToolCall> calls;
  while (!text.empty()) {
    const size_t args_at = text.find(kArgs);
    if (args_at == std::string_view::npos) return std::nullopt;
    std::string_view name = text.substr(0, args_at);
    name = trim_space(name.substr(0, name.find(kCallId)));
    text.remove_prefix(args_at + kArgs.size());
    const size_t next = text.find(kCalls);
    ordered_json args = leading_json(trim_space(text.substr(0, next)), '}');
    auto call = call_of(name, args, r);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    if (next == std::string_view::npos) break;
    text.remove_prefix(next + kCalls.size());
  }
  return calls;
}

}  // namespace

ParsedToolOutput parse_mistral_tool_output(std::string_view text, const ToolRequest& r) {
  ParsedToolOutput out;
  const size_t at = text.find(kCalls);
  // No marker: a forced call's bare array, or content.
  std::string_view body =
      trim_space(at == std::string_view::npos ? text : text.substr(at + kCalls.size()));
  std::optional<std::vector<ToolCall>> calls;
  if (!body.empty() && body.front() == '[')
    calls = array_calls(body, r);
  else if (at != std::string_view::npos)
    calls = named_calls(body, r);
  if (!calls) {
    out.content = std::string(text);
    return out;
  }
  if (at != std::string_view::npos) out.content = std::string(trim_space(text.substr(0, at)));
  out.calls = std::move(*calls);
  return out;
}

std::string mistral_tool_call_grammar(const ToolRequest& r, int max_calls) {
  ordered_json any = ordered_json::array();
  for (const auto& fn : r.functions) {
    if (r.choice == ToolRequest::Choice::Named && fn.name != r.named) continue;
    any.push_back({{"type", "object"},
                   {"properties", {{"name", {{"const", fn.name}}}, {"arguments", fn.parameters}}},
                   {"required", {"name", "arguments"}},
                   {"additionalProperties", false}});
  }
  const ordered_json schema = {{"type", "array"},
                               {"items", any.size() == 1 ? any[0] : ordered_json{{"anyOf", any}}},
                               {"minItems", 1},
                               {"maxItems", max_calls}};
  try {
    return json_schema_to_gbnf(schema).gbnf;
  } catch (const std::exception& e) {
    throw InvalidRequest("tools", e.what());
  }
}

bool may_become_mistral_tool_call(std::string_view text) {
  const std::string_view t = trim_space(text);
  return kCalls.substr(0, std::min(kCalls.size(), t.size())) == t.substr(0, kCalls.size());
}

std::vector<std::string> mistral_kept_tokens() {
  return {std::string(kCalls), std::string(kArgs), std::string(kCallId)};
}

std::string mistral_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(9, ' ');
  for (char& c : id) c = kAlphabet[rng() % kAlphabet.size()];
  return id;
}

std::string mistral_id_for(const std::string& id) {
  const bool fits = id.size() == 9 && std::all_of(id.begin(), id.end(), [](unsigned char c) {
                      return std::isalnum(c) != 0;
                    });
  if (fits) return id;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across requests and runs
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::string out(9, ' ');
  for (char& c : out) {
    c = kAlphabet[h % kAlphabet.size()];
    h /= kAlphabet.size();
    if (h == 0) h = 0x9E3779B97F4A7C15ull;
  }
  return out;
}

json mistral_tool_call_ids(const json& messages) {
  if (!messages.is_array()) return messages;
  json out = messages;
  for (auto& m : out) {
    if (!m.is_object()) continue;
    if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array())
      for (auto& c : *calls)
        if (c.is_object() && c.contains("id") && c["id"].is_string())
          c["id"] = mistral_id_for(c["id"].get<std::string>());
    if (auto id = m.find("tool_call_id"); id != m.end() && id->is_string())
      *id = mistral_id_for(id->get<std::string>());
  }
  return out;
}

}  // namespace pith::server
