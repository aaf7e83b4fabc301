// Tool calling without a server: request validation, the grammar a forced call runs under (run
// byte by byte through the SDK's matcher), parsing model output back into calls, and tool
// conversations rendered through real chat templates exactly as Hugging Face renders them
// (tests/data/templates/tool_conversations.json, made by tools/make_tool_template_cases.py).
// The deprecated `functions` / `function_call` fields, served as tools, from request to response.
#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "byte_grammar.h"
#include "chat_template/chat_template.h"
#include "server/completion_session.h"
#include "server/legacy_functions.h"
#include "server/openai_api.h"
#include "server/tool_calls.h"

namespace pith::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"enum": ["Paris", "Tokyo"]}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "noop"}}])";

ToolRequest request(const std::string& choice_json, bool parallel = true) {
  json body = {{"tools", json::parse(kTools)},
               {"tool_choice", json::parse(choice_json)},
               {"parallel_tool_calls", parallel}};
  return parse_tool_request(body, nullptr);
}

struct CallGrammar : ByteGrammar {
  CallGrammar(const ToolRequest& r, ToolCallFormat f) : ByteGrammar(tool_call_grammar(r, f)) {}
};

const char* kParis = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}})";

TEST(ToolRequest, ChoicesAndRejections) {
  EXPECT_EQ(request("\"auto\"").choice, ToolRequest::Choice::Auto);
  EXPECT_EQ(request("\"none\"").choice, ToolRequest::Choice::None);
  EXPECT_FALSE(request("\"none\"").active());
  EXPECT_TRUE(request("\"required\"").forced());
  ToolRequest named = request(R"({"type": "function", "function": {"name": "noop"}})");
  EXPECT_EQ(named.choice, ToolRequest::Choice::Named);
  EXPECT_EQ(named.named, "noop");
  EXPECT_EQ(named.functions[1].parameters, ordered_json({{"type", "object"}}));
  // Tools without tool_choice: auto, as OpenAI does.
  EXPECT_EQ(parse_tool_request({{"tools", json::parse(kTools)}}, nullptr).choice,
            ToolRequest::Choice::Auto);
  auto rejected = [](const json& body, const std::string& param) {
    try {
      parse_tool_request(body, nullptr);
      ADD_FAILURE() << "accepted " << body.dump();
    } catch (const InvalidRequest& e) {
      EXPECT_EQ(e.param(), param) << e.what();
    }
  };
  rejected({{"tools", json::parse(kTools)}, {"tool_choice", "sometimes"}}, "tool_choice");
  rejected({{"tools", json::parse(kTools)},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "missing"}}}}}},
           "tool_choice");
  rejected({{"tool_choice", "required"}}, "tool_choice");  // no tools
  rejected({{"tools", {{{"type", "retrieval"}}}}}, "tools");
  rejected({{"tools", {{{"type", "function"}, {"function", {{"description", "no name"}}}}}}},
           "tools");
  rejected({{"tools", json::parse(kTools)}, {"parallel_tool_calls", "yes"}}, "parallel_tool_calls");
}

TEST(ToolCallGrammar, HermesRequiredAdmitsOnlyValidCalls) {
  CallGrammar g(request("\"required\""), ToolCallFormat::Hermes);
  const std::string one = std::string("<tool_call>\n") + kParis + "\n</tool_call>";
  EXPECT_TRUE(g.matches(one)) << g.gbnf;
  EXPECT_TRUE(g.matches("<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(g.matches(one + "\n" + one));  // parallel calls
  EXPECT_FALSE(g.matches(kParis));           // the tags are required
  EXPECT_FALSE(
      g.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                "\"Lima\", \"unit\": \"c\"}}\n</tool_call>"));  // enum
  EXPECT_FALSE(
      g.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                "\"Paris\"}}\n</tool_call>"));  // required argument missing
  EXPECT_FALSE(g.matches("<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.matches("Sure! " + one));

  CallGrammar single(request("\"required\"", /*parallel=*/false), ToolCallFormat::Hermes);
  EXPECT_TRUE(single.matches(one));
  EXPECT_FALSE(single.matches(one + "\n" + one));
}

TEST(ToolCallGrammar, NamedAndLlama3Json) {
  CallGrammar named(request(R"({"type": "function", "function": {"name": "noop"}})"),
                    ToolCallFormat::Hermes);
  EXPECT_TRUE(named.matches("<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(named.matches(std::string("<tool_call>\n") + kParis + "\n</tool_call>"));
  CallGrammar llama(request("\"required\""), ToolCallFormat::Llama3Json);
  EXPECT_TRUE(
      llama.matches(R"({"name": "get_weather", "parameters": {"city": "Tokyo", "unit": "f"}})"));
  EXPECT_FALSE(llama.matches(kParis));  // "arguments" is Hermes' key
}

TEST(ToolOutput, HermesCallsAndTheTextAround) {
  ToolRequest r = request("\"auto\"");
  ParsedToolOutput p = parse_tool_output(
      std::string("Let me check.\n<tool_call>\n") + kParis +
          "\n</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>",
      ToolCallFormat::Hermes, r);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"city", "Paris"}, {"unit", "c"}}));
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.content, "Let me check.");
  // Unknown functions, broken JSON and plain text stay content.
  for (const char* text :
       {"<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"noop\", \"arguments\": {\n</tool_call>", "It is sunny."}) {
    ParsedToolOutput plain = parse_tool_output(text, ToolCallFormat::Hermes, r);
    EXPECT_TRUE(plain.calls.empty()) << text;
    EXPECT_EQ(plain.content, text);
  }
}

TEST(ToolOutput, Llama3JsonAndStreamingHoldBack) {
  ToolRequest r = request("\"auto\"");
  ParsedToolOutput p = parse_tool_output(
      R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Tokyo", "unit": "f"}})",
      ToolCallFormat::Llama3Json, r);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_TRUE(may_become_tool_call("", ToolCallFormat::Hermes));
  EXPECT_TRUE(may_become_tool_call("  <tool_", ToolCallFormat::Hermes));
  EXPECT_TRUE(may_become_tool_call("<tool_call>\n{\"na", ToolCallFormat::Hermes));
  EXPECT_FALSE(may_become_tool_call("Hello", ToolCallFormat::Hermes));
  EXPECT_FALSE(may_become_tool_call("<toot", ToolCallFormat::Hermes));
  EXPECT_TRUE(may_become_tool_call("{\"name\"", ToolCallFormat::Llama3Json));
  EXPECT_FALSE(may_become_tool_call("The", ToolCallFormat::Llama3Json));
}

// Qwen3-Coder / Qwen3.5: XML calls, values as text (strings) or JSON (the rest).
const char* kXmlTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7},
                   "options": {"type": "object", "properties": {"hourly": {"type": "boolean"}},
                               "required": ["hourly"]}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "noop"}}])";

ToolRequest xml_request(const std::string& choice_json, bool parallel = true) {
  nlohmann::ordered_json body = {{"tools", nlohmann::ordered_json::parse(kXmlTools)},
                                 {"tool_choice", nlohmann::ordered_json::parse(choice_json)},
                                 {"parallel_tool_calls", parallel}};
  return parse_tool_request(json(body), &body);
}

const char* kXmlCall =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo <centre>\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=options>\n{\"hourly\": true}\n"
    "</parameter>\n</function>\n</tool_call>";

TEST(ToolOutput, Qwen3CoderCallsTypedByTheirSchema) {
  ToolRequest r = xml_request("\"auto\"");
  ParsedToolOutput p =
      parse_tool_output(std::string("I will look.\n\n") + kXmlCall +
                            "\n<tool_call>\n<function=noop>\n</function>\n</tool_call>",
                        ToolCallFormat::Qwen3Coder, r);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments),
            json({{"city", "São Paulo <centre>"}, {"days", 3}, {"options", {{"hourly", true}}}}));
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.content, "I will look.");
  // A string parameter that looks like a number stays a string.
  ParsedToolOutput digits = parse_tool_output(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\n123\n</parameter>\n"
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
      ToolCallFormat::Qwen3Coder, r);
  ASSERT_EQ(digits.calls.size(), 1u);
  EXPECT_EQ(json::parse(digits.calls[0].arguments), json({{"city", "123"}, {"days", 2}}));
  // Unknown functions and malformed blocks stay content.
  for (const char* text :
       {"<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>",
        "<tool_call>\n<function=noop>\n<parameter=x>\n1\n</tool_call>", "Sunny."}) {
    ParsedToolOutput plain = parse_tool_output(text, ToolCallFormat::Qwen3Coder, r);
    EXPECT_TRUE(plain.calls.empty()) << text;
    EXPECT_EQ(plain.content, text);
  }
  EXPECT_TRUE(may_become_tool_call("<tool", ToolCallFormat::Qwen3Coder));
  EXPECT_FALSE(may_become_tool_call("Sure", ToolCallFormat::Qwen3Coder));
}

TEST(ToolCallGrammar, Qwen3CoderRequiredAdmitsOnlyValidCalls) {
  CallGrammar g(xml_request("\"required\""), ToolCallFormat::Qwen3Coder);
  EXPECT_TRUE(g.matches(kXmlCall)) << g.gbnf;
  const std::string minimal =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n"
      "<parameter=days>\n7\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(g.matches(minimal));
  EXPECT_TRUE(g.matches("<tool_call>\n<function=noop>\n</function>\n</tool_call>"));
  EXPECT_TRUE(g.matches(minimal + "\n" + minimal));  // parallel calls
  auto with = [](const std::string& days, const std::string& extra = "") {
    return "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n" + extra +
           "<parameter=days>\n" + days + "\n</parameter>\n</function>\n</tool_call>";
  };
  EXPECT_TRUE(g.matches(with("1", "<parameter=unit>\nf\n</parameter>\n")));
  EXPECT_FALSE(g.matches(with("8")));                                         // maximum
  EXPECT_FALSE(g.matches(with("two")));                                       // integer
  EXPECT_FALSE(g.matches(with("1", "<parameter=unit>\nk\n</parameter>\n")));  // enum
  EXPECT_FALSE(
      g.matches("<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n"
                "</function>\n</tool_call>"));  // days is required
  EXPECT_FALSE(g.matches("Sure. " + minimal));

  CallGrammar named(xml_request(R"({"type": "function", "function": {"name": "noop"}})"),
                    ToolCallFormat::Qwen3Coder);
  EXPECT_TRUE(named.matches("<tool_call>\n<function=noop>\n</function>\n</tool_call>"));
  EXPECT_FALSE(named.matches(minimal));
  CallGrammar single(xml_request("\"required\"", /*parallel=*/false), ToolCallFormat::Qwen3Coder);
  EXPECT_FALSE(single.matches(minimal + "\n" + minimal));
}

// Gemma 4: <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, strings between <|"|> marks.
const char* kGemmaCall =
    "<|tool_call>call:get_weather{city:<|\"|>São Paulo, \"SP\" {x:1}<|\"|>,days:3,"
    "options:{hourly:true,hours:[6, 12.5e0,-1],note:null,tags:[]},unit:<|\"|><|\"|>}<tool_call|>";

TEST(ToolOutput, Gemma4CallsAndTheTextAround) {
  ToolRequest r = xml_request("\"auto\"");
  ParsedToolOutput p = parse_tool_output(
      std::string("Checking.\n") + kGemmaCall + "<|tool_call>call:noop{}<tool_call|>",
      ToolCallFormat::Gemma4, r);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  // Compact JSON, keys in the order written, numbers as written.
  EXPECT_EQ(p.calls[0].arguments,
            R"({"city":"São Paulo, \"SP\" {x:1}","days":3,"options":{"hourly":true,)"
            R"("hours":[6,12.5e0,-1],"note":null,"tags":[]},"unit":""})");
  EXPECT_EQ(p.calls[1].name, "noop");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.content, "Checking.");
  // Whitespace where llama.cpp's parser allows it, keys quoted the way declarations quote them,
  // and a call cut off before its closing marker (the budget ran out).
  ParsedToolOutput loose = parse_tool_output(
      "<|tool_call>call:get_weather{ city: <|\"|>Lima<|\"|> ,\n <|\"|>days<|\"|>:2 }",
      ToolCallFormat::Gemma4, r);
  ASSERT_EQ(loose.calls.size(), 1u);
  EXPECT_EQ(loose.calls[0].arguments, R"({"city":"Lima","days":2})");
  EXPECT_EQ(loose.content, "");
}

// Anything that is not a well-formed call to a declared function stays content, untouched.
TEST(ToolOutput, Gemma4MalformedCallsStayContent) {
  ToolRequest r = xml_request("\"auto\"");
  const std::string deep =
      "<|tool_call>call:noop{a:" + std::string(100, '[') + std::string(100, ']') + "}<tool_call|>";
  for (const std::string& text : std::vector<std::string>{
           "<|tool_call>call:rm_rf{}<tool_call|>",                           // unknown function
           "<|tool_call>get_weather{city:<|\"|>x<|\"|>}<tool_call|>",        // no "call:"
           "<|tool_call>call:get_weather{city:<|\"|>x}<tool_call|>",         // unclosed string
           "<|tool_call>call:get_weather{city:Paris}<tool_call|>",           // bare word
           "<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,}<tool_call|>",  // trailing comma
           "<|tool_call>call:get_weather{:1}<tool_call|>",                   // empty key
           "<|tool_call>call:get_weather{days:1.}<tool_call|>",              // bad number
           "<|tool_call>call:get_weather{days:1} extra<tool_call|>",         // text after it
           "<|tool_call>call:get_weather", "<|tool_call>", deep,             // cut short, too deep
           "Sunny."}) {
    ParsedToolOutput plain = parse_tool_output(text, ToolCallFormat::Gemma4, r);
    EXPECT_TRUE(plain.calls.empty()) << text;
    EXPECT_EQ(plain.content, text);
  }
  // A malformed second call leaves the first one a call and itself content.
  ParsedToolOutput half =
      parse_tool_output("<|tool_call>call:noop{}<tool_call|><|tool_call>call:noop{<tool_call|>",
                        ToolCallFormat::Gemma4, r);
  ASSERT_EQ(half.calls.size(), 1u);
  EXPECT_EQ(half.content, "<|tool_call>call:noop{<tool_call|>");
  EXPECT_TRUE(may_become_tool_call("  <|tool_", ToolCallFormat::Gemma4));
  EXPECT_FALSE(may_become_tool_call("<tool_call>", ToolCallFormat::Gemma4));
  EXPECT_FALSE(may_become_tool_call("Let me", ToolCallFormat::Gemma4));
}

// The forced call's arguments follow the function's schema, in Gemma 4's value syntax.
const char* kGemmaValidCall =
    "<|tool_call>call:get_weather{city:<|\"|>São Paulo, \"SP\" {x:1}<|\"|>,unit:<|\"|>f<|\"|>,"
    "days:3, options:{ hourly:true}}<tool_call|>";

TEST(ToolCallGrammar, Gemma4RequiredAdmitsCallsInItsSyntax) {
  CallGrammar g(xml_request("\"required\""), ToolCallFormat::Gemma4);
  EXPECT_TRUE(g.matches(kGemmaValidCall)) << g.gbnf;
  EXPECT_TRUE(g.matches("<|tool_call>call:get_weather{city:<|\"|><|\"|>,days:7}<tool_call|>"));
  EXPECT_TRUE(g.matches("<|tool_call>call:noop{}<tool_call|>"));
  EXPECT_TRUE(g.matches(std::string(kGemmaValidCall) + kGemmaValidCall));  // parallel calls
  // Outside the schema: undeclared members, a value not in the enum, out of range, missing.
  EXPECT_FALSE(g.matches(kGemmaCall));
  EXPECT_FALSE(
      g.matches("<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,unit:<|\"|>k<|\"|>,"
                "days:3}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:get_weather{city:<|\"|>x<|\"|>,days:8}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:get_weather{city:<|\"|>x<|\"|>}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:get_weather{city:3,days:3}<tool_call|>"));
  // What the grammar admits, the parser reads back as the same arguments.
  ParsedToolOutput p =
      parse_tool_output(kGemmaValidCall, ToolCallFormat::Gemma4, xml_request("\"required\""));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"city", "São Paulo, \"SP\" {x:1}"},
                                                     {"unit", "f"},
                                                     {"days", 3},
                                                     {"options", {{"hourly", true}}}}));
  // Strings may hold anything but the closing mark, "<" and "|" runs included.
  EXPECT_TRUE(g.matches("<|tool_call>call:noop{s:<|\"|>a<<|<|\"<|\"|b<|<|\"|>}<tool_call|>"));
  EXPECT_TRUE(g.matches("<|tool_call>call:noop{s:<|\"|><|\"|<|\"|>}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:noop{s:<|\"|>a<|\"|>b<|\"|>}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:rm_rf{}<tool_call|>"));
  EXPECT_FALSE(g.matches("<|tool_call>call:noop{a:Paris}<tool_call|>"));
  EXPECT_FALSE(g.matches("Sure. <|tool_call>call:noop{}<tool_call|>"));
  CallGrammar named(xml_request(R"({"type": "function", "function": {"name": "noop"}})"),
                    ToolCallFormat::Gemma4);
  EXPECT_TRUE(named.matches("<|tool_call>call:noop{}<tool_call|>"));
  EXPECT_FALSE(named.matches(kGemmaValidCall));
  CallGrammar single(xml_request("\"required\"", /*parallel=*/false), ToolCallFormat::Gemma4);
  EXPECT_FALSE(single.matches(std::string(kGemmaValidCall) + kGemmaValidCall));
}

TEST(ToolCallFormat, DetectedFromTheTemplate) {
  auto read = [](const std::string& name) {
    std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/" + name + ".jinja");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(detect_tool_call_format(read("Qwen-Qwen2.5-7B-Instruct")), ToolCallFormat::Hermes);
  EXPECT_EQ(detect_tool_call_format(read("meta-llama-Llama-3.1-8B-Instruct")),
            ToolCallFormat::Llama3Json);
  EXPECT_EQ(detect_tool_call_format(read("Qwen3.5-4B")), ToolCallFormat::Qwen3Coder);
  EXPECT_EQ(detect_tool_call_format(read("google-gemma-4-31B-it")), ToolCallFormat::Gemma4);
  EXPECT_EQ(parse_tool_call_format("gemma4"), ToolCallFormat::Gemma4);
  EXPECT_EQ(parse_tool_call_format("qwen3_coder"), ToolCallFormat::Qwen3Coder);
  EXPECT_EQ(parse_tool_call_format("hermes"), ToolCallFormat::Hermes);
  EXPECT_EQ(parse_tool_call_format("llama3_json"), ToolCallFormat::Llama3Json);
  EXPECT_EQ(detect_tool_call_format(read("mistralai-Mistral-Nemo-Instruct-2407")),
            ToolCallFormat::Mistral);
  EXPECT_EQ(parse_tool_call_format("mistral"), ToolCallFormat::Mistral);
  EXPECT_FALSE(parse_tool_call_format("pythonic"));
}

TEST(ToolConversation, RendersLikeHuggingFace) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/tool_conversations.json");
  ASSERT_TRUE(in) << "tool_conversations.json missing";
  ordered_json data = ordered_json::parse(in);
  ASSERT_GE(data["cases"].size(), 4u);
  for (const auto& c : data["cases"]) {
    std::ifstream t(std::string(PITH_TEST_DATA) + "/templates/" + c["template"].get<std::string>() +
                    ".jinja");
    std::stringstream source;
    source << t.rdbuf();
    ChatTemplate tmpl(source.str());
    ordered_json messages = ordered_json::array();
    for (const auto& m : c["openai_messages"]) messages.push_back(template_message(json(m)));
    ordered_json vars = {{"messages", messages},        {"add_generation_prompt", true},
                         {"tools", c["tools"]},         {"bos_token", c["bos_token"]},
                         {"eos_token", c["eos_token"]}, {"date_string", c["date_string"]}};
    if (c.contains("chat_template_kwargs"))  // as chat_prompt_tokens passes them
      vars["extra_context"] = c["chat_template_kwargs"];
    EXPECT_EQ(tmpl.render(ChatTemplate::variables_for(vars)), c["output"].get<std::string>())
        << c["template"] << " / " << c["name"];
  }
}

// Legacy function calling: the request's fields and messages rewritten as tools (ids pairing
// each function message with its function's latest call), and refusals named as sent.
TEST(LegacyFunctions, RewrittenAsTools) {
  json body = json::parse(R"({
    "functions": [{"name": "get_weather", "parameters": {"type": "object"}}, {"name": "noop"}],
    "function_call": {"name": "get_weather"},
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null,
       "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"role": "function", "name": "get_weather", "content": "sunny"},
      {"role": "assistant", "content": null, "function_call": {"name": "get_weather"}},
      {"role": "function", "name": "get_weather", "content": "rain"}]})");
  EXPECT_TRUE(uses_legacy_functions(body));
  ordered_json ordered = body;
  legacy_functions_as_tools(body, ordered);
  EXPECT_FALSE(uses_legacy_functions(body));
  EXPECT_FALSE(body.contains("functions") || body.contains("function_call"));
  EXPECT_EQ(body["tools"][1], json::parse(R"({"type": "function", "function": {"name": "noop"}})"));
  EXPECT_EQ(body["tool_choice"],
            json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(body["parallel_tool_calls"], false);
  const json& m = body["messages"];
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "call_legacy_0");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_FALSE(m[1].contains("function_call"));
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["tool_call_id"], "call_legacy_0");
  EXPECT_EQ(m[4]["tool_call_id"], "call_legacy_1");
  EXPECT_EQ(ordered["messages"][4]["tool_call_id"], "call_legacy_1");
  EXPECT_FALSE(uses_legacy_functions(json::parse(R"({"messages": [{"role": "tool"}]})")));

  auto param_of = [](const char* text) {
    json b = json::parse(text);
    ordered_json o = b;
    try {
      legacy_functions_as_tools(b, o);
    } catch (const InvalidRequest& e) {
      return e.param();
    }
    return std::string("accepted");
  };
  const char* kFn = R"("functions": [{"name": "f"}])";
  EXPECT_EQ(param_of(R"({"functions": [], "messages": []})"), "functions");
  EXPECT_EQ(param_of(R"({"functions": [{"name": ""}]})"), "functions");
  EXPECT_EQ(param_of(R"({"functions": [{"name": "f", "strict": true}]})"), "functions");
  EXPECT_EQ(param_of(R"({"functions": [{"name": "f", "parameters": 1}]})"), "functions");
  EXPECT_EQ(param_of(R"({"functions": [{"name": "f"}], "tools": []})"), "functions");
  EXPECT_EQ(param_of(R"({"function_call": "auto"})"), "function_call");
  EXPECT_EQ(param_of(fmt::format(R"({{{}, "function_call": "required"}})", kFn).c_str()),
            "function_call");
  EXPECT_EQ(
      param_of(
          fmt::format(R"({{{}, "function_call": "auto", "tool_choice": "auto"}})", kFn).c_str()),
      "function_call");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "function", "content": "x"}]})"), "messages");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "function_call": {"name": "f"}}]})"),
            "messages");
  EXPECT_EQ(param_of(fmt::format(R"({{{}, "function_call": "none"}})", kFn).c_str()), "accepted");
}

const Tokenizer& llama_tokenizer() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  return t;
}

// A template that shows what it was given: tools, calls with their ids' answers.
const ChatTemplate& showing_template() {
  static const ChatTemplate t(
      "{% if tools %}tools:{% for t in tools %}{{ t.function.name }};{% endfor %}\n{% endif %}"
      "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}{% for c in "
      "m.tool_calls %}<tool_call>{{ c.function.name }}{{ c.function.arguments | tojson }}"
      "</tool_call>{% endfor %}{% endif %}{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif "
      "%}\n{% endfor %}assistant:");
  return t;
}

// Through the request parser and a session: the template sees tools and tool messages; the
// response holds the first call as message.function_call, finish_reason "function_call" (or
// "stop" for a named function), streamed as delta.function_call.
TEST(LegacyFunctions, RequestAndResponse) {
  auto parse = [](const json& extra) {
    json body = {{"messages", json::parse(R"([{"role": "user", "content": "Weather?"},
                    {"role": "assistant", "function_call": {"name": "get_weather",
                      "arguments": "{\"city\": \"Paris\"}"}},
                    {"role": "function", "name": "get_weather", "content": "sunny"}])")},
                 {"functions", json::parse(R"([{"name": "get_weather", "parameters":
                    {"type": "object", "properties": {"city": {"type": "string"}}}}])")}};
    body.update(extra);
    return parse_completion_request(body, true, llama_tokenizer(), showing_template(), 4096, 1);
  };
  CompletionRequest r = parse(json::object());
  EXPECT_TRUE(r.legacy_functions);
  EXPECT_EQ(r.tools.choice, ToolRequest::Choice::Auto);
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_EQ(llama_tokenizer().decode(r.prompts[0]),
            "tools:get_weather;user:Weather?assistant:<tool_call>get_weather{\"city\": "
            "\"Paris\"}</tool_call>tool:sunny(call_legacy_0)assistant:");  // (trim_blocks)
  try {
    parse({{"function_call", {{"name", "other"}}}});
    ADD_FAILURE() << "an undeclared function was accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param(), "function_call");
    EXPECT_NE(std::string(e.what()).find("'functions'"), std::string::npos) << e.what();
  }

  const std::string two_calls =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Rome\"}}\n</tool_call>";
  auto run = [&](const CompletionRequest& req) {
    CompletionSession s(req, llama_tokenizer(), "chat-1", "tiny", 7);
    std::vector<json> chunks;
    auto add = [&](std::vector<json> v) { chunks.insert(chunks.end(), v.begin(), v.end()); };
    add(s.on_message("usage 5 0"));
    const auto ids = llama_tokenizer().encode(two_calls, false, false);
    for (int32_t id : ids) add(s.on_message(fmt::format("tok 0 {} -0.5", id)));
    add(s.on_message(fmt::format("end 0 stop {}", ids.size())));
    add(s.finish());
    return std::pair{s.response(), chunks};
  };
  auto [whole, _] = run(r);
  const json& choice = whole["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "function_call");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["message"]["function_call"],
            json::parse(R"({"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"})"));
  EXPECT_TRUE(choice["message"]["content"].is_null());

  json streamed_call;
  std::string last_reason;
  for (const json& c : run(parse({{"stream", true}})).second)
    for (const json& ch : c["choices"]) {
      if (ch["delta"].contains("tool_calls")) ADD_FAILURE() << ch.dump();
      if (ch["delta"].contains("function_call")) streamed_call = ch["delta"]["function_call"];
      if (!ch["finish_reason"].is_null()) last_reason = ch["finish_reason"];
    }
  EXPECT_EQ(streamed_call, choice["message"]["function_call"]);
  EXPECT_EQ(last_reason, "function_call");

  CompletionRequest named = parse({{"function_call", {{"name", "get_weather"}}}});
  EXPECT_EQ(named.tools.choice, ToolRequest::Choice::Named);
  EXPECT_FALSE(named.grammar.empty());
  EXPECT_EQ(run(named).first["choices"][0]["finish_reason"], "stop");
}

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/" + name);
  std::stringstream source;
  source << in.rdbuf();
  return source.str();
}

// Mistral: both generations of [TOOL_CALLS] output, the bare array a forced call writes, text
// around them, and what stays content.
TEST(ToolOutput, MistralCallsInBothShapes) {
  const ToolRequest r = request(R"("auto")");
  auto calls = [&](std::string_view text) {
    ParsedToolOutput p = parse_tool_output(text, ToolCallFormat::Mistral, r);
    std::string s = p.content + "|";
    for (const auto& c : p.calls) s += c.name + c.arguments + ";";
    return s;
  };
  EXPECT_EQ(
      calls(
          R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}, {"name": "noop", "arguments": {}}])"),
      R"(|get_weather{"city":"Paris","unit":"c"};noop{};)");
  EXPECT_EQ(
      calls(
          R"(Let me check. [TOOL_CALLS] [{"name": "noop", "arguments": "{}", "id": "abc123XYZ"}]</s>)"),
      "Let me check.|noop{};");
  EXPECT_EQ(
      calls(
          R"([TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo", "unit": "f"}[TOOL_CALLS]noop[CALL_ID]a1b2c3d4e[ARGS]{})"),
      R"(|get_weather{"city":"Tokyo","unit":"f"};noop{};)");
  EXPECT_EQ(calls(R"([{"name": "noop", "arguments": {}}])"), "|noop{};");  // a forced call
  // Unknown functions, broken JSON and plain text stay content, whole.
  for (const char* text :
       {R"([TOOL_CALLS][{"name": "rm_rf", "arguments": {}}])",
        R"([TOOL_CALLS]noop[ARGS]{"unclosed": )", "[TOOL_CALLS]noop", "Just an answer [1, 2]."})
    EXPECT_EQ(calls(text), std::string(text) + "|") << text;
  EXPECT_TRUE(may_become_tool_call(" [TOOL", ToolCallFormat::Mistral));
  EXPECT_TRUE(may_become_tool_call("[TOOL_CALLS][{\"na", ToolCallFormat::Mistral));
  EXPECT_FALSE(may_become_tool_call("Hello", ToolCallFormat::Mistral));
}

TEST(ToolCallGrammar, MistralForcedCallsAreAJsonArray) {
  CallGrammar required(request(R"("required")"), ToolCallFormat::Mistral);
  EXPECT_TRUE(required.matches(
      R"([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}])"));
  EXPECT_TRUE(required.matches(
      R"([{"name": "noop", "arguments": {}}, {"name": "noop", "arguments": {}}])"));
  EXPECT_FALSE(
      required.matches(R"([{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}])"));
  EXPECT_FALSE(required.matches("[]"));
  CallGrammar named(request(R"({"type": "function", "function": {"name": "noop"}})"),
                    ToolCallFormat::Mistral);
  EXPECT_TRUE(named.matches(R"([{"name": "noop", "arguments": {}}])"));
  EXPECT_FALSE(
      named.matches(R"([{"name": "noop", "arguments": {}}, {"name": "noop", "arguments": {}}])"));
  EXPECT_FALSE(
      named.matches(R"([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}])"));
}

// Mistral's templates read only 9-character ids: new calls get one, a conversation's other ids
// map onto the same 9 characters each time (so results still answer their calls).
TEST(ToolConversation, MistralCallIds) {
  auto fits = [](const std::string& id) {
    return id.size() == 9 &&
           std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
  };
  EXPECT_TRUE(fits(mistral_call_id()));
  EXPECT_NE(mistral_call_id(), mistral_call_id());
  EXPECT_EQ(mistral_id_for("abc123XYZ"), "abc123XYZ");
  const std::string mapped = mistral_id_for("call_0123456789abcdef01234567");
  EXPECT_TRUE(fits(mapped));
  EXPECT_EQ(mistral_id_for("call_0123456789abcdef01234567"), mapped);
  EXPECT_NE(mistral_id_for("call_0123456789abcdef01234568"), mapped);
  json messages = json::parse(R"([{"role": "assistant", "tool_calls": [{"id": "call_1",
      "type": "function", "function": {"name": "noop", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "done"}])");
  json fixed = mistral_tool_call_ids(messages);
  EXPECT_TRUE(fits(fixed[0]["tool_calls"][0]["id"]));
  EXPECT_EQ(fixed[0]["tool_calls"][0]["id"], fixed[1]["tool_call_id"]);
  // Through the request parser and Mistral NeMo's template (which refuses other ids).
  const Tokenizer tekken =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/tekken-240911.gguf");
  const ChatTemplate nemo(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja"));
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
               {"tools", json::parse(kTools)}};
  for (const auto& m : messages) body["messages"].push_back(m);
  body["messages"].push_back({{"role", "assistant"}, {"content", "Done."}});
  body["messages"].push_back({{"role", "user"}, {"content", "Thanks"}});
  CompletionRequest r =
      parse_completion_request(body, true, tekken, nemo, 4096, 1, nullptr, ToolCallFormat::Mistral);
  const std::string prompt = tekken.decode(r.prompts[0]);
  EXPECT_NE(prompt.find("\"id\": \"" + mistral_id_for("call_1") + "\""), std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("\"call_id\": \"" + mistral_id_for("call_1") + "\""), std::string::npos);

  // The session keeps the [TOOL_CALLS] control token's text for the parser; calls get 9-char ids.
  body["messages"] = json::array({{{"role", "user"}, {"content", "Weather?"}}});
  CompletionRequest ask =
      parse_completion_request(body, true, tekken, nemo, 4096, 1, nullptr, ToolCallFormat::Mistral);
  CompletionSession s(ask, tekken, "chat-1", "nemo", 7);
  s.on_message("usage 5 0");
  const auto ids = tekken.encode(
      R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}])",
      false, /*parse_special=*/true);
  ASSERT_TRUE(tekken.is_special(ids[0]));
  for (int32_t id : ids) s.on_message(fmt::format("tok 0 {} -0.5", id));
  s.on_message(fmt::format("end 0 stop {}", ids.size()));
  s.finish();
  const json choice = s.response()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_TRUE(fits(choice["message"]["tool_calls"][0]["id"]));
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"],
            R"({"city":"Paris","unit":"c"})");
}

}  // namespace
}  // namespace pith::server
