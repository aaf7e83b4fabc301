// OpenAI tool calling on a chat template's own tool-call format:
//  - the request side: `tools`, `tool_choice` (none, auto, required, a named function) and
//    `parallel_tool_calls`, validated into a ToolRequest;
//  - required / named: a GBNF grammar (json_schema_grammar.h) that only admits calls in the
//    model's format whose arguments satisfy the function's parameter schema;
//  - every mode: the model's output parsed back into tool calls.
// Formats (vLLM's --tool-call-parser names):
//   hermes      <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>  (one or more;
//               Hermes, Qwen 2.5 / 3 templates)
//   llama3_json {"name": NAME, "parameters": {...}}  (one call; Llama 3.1 / 3.2 templates)
//   qwen3_coder <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...
//               </function>\n</tool_call>  (one or more; Qwen3-Coder, Qwen3.5; tool_calls_xml.cpp)
//   gemma4      <|tool_call>call:NAME{ARG:VALUE,...}<tool_call|>  (one or more; Gemma 4, strings
//               quoted as <|"|>text<|"|>; tool_calls_gemma4.cpp)
//   mistral     [TOOL_CALLS][{"name": NAME, "arguments": {...}}, ...] or
//   [TOOL_CALLS]NAME[ARGS]{...}
//               (one or more; Mistral 7B v0.3, NeMo, Small 3.x, Devstral; tool_calls_mistral.cpp)
//   harmony     <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
//               (one; gpt-oss; vLLM's "openai"; harmony.h, tool_calls_harmony.cpp)
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/harmony.h"
#include "server/json_schema_grammar.h"

namespace pith::server {

enum class ToolCallFormat { Hermes, Llama3Json, Qwen3Coder, Gemma4, Mistral, Harmony };

const char* tool_call_format_name(ToolCallFormat f);
// "hermes", "llama3_json", "qwen3_coder", "gemma4", "mistral", "harmony" (or "openai"); nullopt
// for anything else.
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name);
// The format a chat template renders tool calls in: harmony for gpt-oss's (is_harmony_template),
// gemma4 for templates that write
// '<|tool_call>call:', mistral for templates that write [TOOL_CALLS], qwen3_coder for templates
// that write <function=...> and <parameter=...>, llama3_json for templates that ask for {"name":
// ..., "parameters": ...}, hermes otherwise.
ToolCallFormat detect_tool_call_format(const std::string& template_source);

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema ({"type": "object"} when absent)
};

struct ToolRequest {
  enum class Choice { None, Auto, Required, Named };
  Choice choice = Choice::None;
  std::vector<ToolFunction> functions;
  std::string named;                      // Choice::Named: the function's name
  bool parallel = true;                   // parallel_tool_calls
  nlohmann::ordered_json template_tools;  // `tools` as sent, for the chat template
  // Whether the output may hold tool calls.
  bool active() const { return choice != Choice::None && !functions.empty(); }
  // Whether the grammar forces a call.
  bool forced() const { return choice == Choice::Required || choice == Choice::Named; }
};

// Throws InvalidRequest naming tools / tool_choice / parallel_tool_calls. `ordered` (optional)
// is the same body with members in the order sent: parameter properties keep that order.
ToolRequest parse_tool_request(const nlohmann::json& body, const nlohmann::ordered_json* ordered);

// The grammar of the calls a forced choice admits. Throws InvalidRequest (param "tools") for a
// parameter schema the grammar cannot enforce.
std::string tool_call_grammar(const ToolRequest& request, ToolCallFormat format);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialized
};

struct ParsedToolOutput {
  std::string content;          // text outside the calls (trimmed)
  std::vector<ToolCall> calls;  // empty: the output is plain content
};

// The calls in a complete model output. Calls to unknown functions, or text that only looks
// like a call, stay content.
ParsedToolOutput parse_tool_output(std::string_view text, ToolCallFormat format,
                                   const ToolRequest& request);

// The tagged formats (hermes, qwen3_coder, gemma4): the open…close blocks of an output
// (<tool_call>…</tool_call>, <|tool_call>…<tool_call|>), each body turned into a call by
// `call_of` (nullopt: not a call, and the rest stays content); an unclosed block at the end (the
// budget ran out) is tried too.
ParsedToolOutput parse_tool_call_blocks(
    std::string_view text, std::string_view open, std::string_view close,
    const std::function<std::optional<ToolCall>(std::string_view)>& call_of);

// The qwen3_coder halves (tool_calls_xml.cpp): its parser, and its forced-call grammar with at
// most max_calls calls.
ParsedToolOutput parse_xml_tool_output(std::string_view text, const ToolRequest& request);
std::string xml_tool_call_grammar(const ToolRequest& request, int max_calls);
// The gemma4 halves (tool_calls_gemma4.cpp), likewise.
ParsedToolOutput parse_gemma4_tool_output(std::string_view text, const ToolRequest& request);
std::string gemma4_tool_call_grammar(const ToolRequest& request, int max_calls);
// Whether a template writes Gemma 4 calls but reads no `tool` messages (Gemma 4's first
// template): the conversation must then go through gemma4_tool_turns, which folds each assistant
// message with calls, the tool messages after it (as `tool_responses`: {name, response}) and the
// answer after those into one assistant message.
bool gemma4_needs_tool_turns(std::string_view template_source);
nlohmann::ordered_json gemma4_tool_turns(const nlohmann::ordered_json& messages);
// The mistral halves (tool_calls_mistral.cpp): its parser, its forced-call grammar (the bare
// JSON array of at most max_calls calls), whether streamed text may still become a call, the
// control tokens whose text the session keeps in the output for the parser, a new call id (9
// letters and digits, all Mistral's templates accept), and a conversation's ids mapped onto
// such ids (an id that already fits is kept; others map to the same 9 characters each time).
ParsedToolOutput parse_mistral_tool_output(std::string_view text, const ToolRequest& request);
std::string mistral_tool_call_grammar(const ToolRequest& request, int max_calls);
bool may_become_mistral_tool_call(std::string_view text);
std::vector<std::string> mistral_kept_tokens();
std::string mistral_call_id();
std::string mistral_id_for(const std::string& id);
nlohmann::json mistral_tool_call_ids(const nlohmann::json& messages);
// The harmony halves (tool_calls_harmony.cpp): whether a template writes harmony (<|channel|>
// and <|call|>); the calls among a reader's addressed messages (functions the request declares,
// JSON object arguments; without a request none), the bodies of the others as content; the
// parser of a whole output; the forced-call grammar (one call); a response_format grammar (GBNF
// with a root rule) wrapped as the final message's body; and a conversation in the shape
// gpt-oss's template reads (reasoning_content as `thinking`, one call per assistant message).
bool is_harmony_template(std::string_view template_source);
ParsedToolOutput harmony_tool_calls(const std::vector<HarmonyReader::Addressed>& addressed,
                                    const ToolRequest* request);
ParsedToolOutput parse_harmony_tool_output(std::string_view text, const ToolRequest& request);
std::string harmony_tool_call_grammar(const ToolRequest& request);
std::string harmony_answer_grammar(std::string gbnf);
nlohmann::ordered_json harmony_turns(const nlohmann::ordered_json& messages);
// The calls a forced choice admits, for formats that write the name and then the arguments:
// per function it may name (all, or the named one) the alternative `"NAME" BETWEEN def-vK`
// (BETWEEN: GBNF, may be empty), joined by " | ", and the rules of the parameters schemas as
// $defs (schema_definition_rules; any object for a function without one) in `syntax`.
struct ForcedCallRules {
  std::string alternatives, rules;
};
ForcedCallRules forced_call_rules(const ToolRequest& request, std::string_view between,
                                  ValueSyntax syntax);
// `s` as a GBNF string literal (quotes, backslashes and newlines escaped).
std::string gbnf_literal(std::string_view s);
// `s` without leading and trailing whitespace.
std::string_view trim_space(std::string_view s);
// The GBNF rules of the schemas in `defs` (name -> JSON Schema), written in `syntax`: the rule of
// defs[N] is def-N, the rules share one namespace. Throws InvalidRequest("tools") for a schema
// the converter refuses. Empty for no defs.
std::string schema_definition_rules(const nlohmann::ordered_json& defs, ValueSyntax syntax);

// While streaming with tool_choice auto: whether the output so far could still turn out to be
// a tool call (its text is then held back until it is decided).
bool may_become_tool_call(std::string_view text, ToolCallFormat format);

// Chat messages as templates expect them: assistant tool_calls with `arguments` parsed from
// their JSON string into objects (templates iterate or re-serialize them), tool messages with
// their tool_call_id. Throws InvalidRequest (param "messages").
nlohmann::ordered_json template_message(const nlohmann::json& message);

}  // namespace pith::server
