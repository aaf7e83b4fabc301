// Harmony (gpt-oss's message format) without a model: the reader that splits an output into
// reasoning, content and addressed messages, whole and in every split of the stream; the calls
// taken from addressed messages; the forced-call and response_format grammars (run byte by
// byte through the SDK's matcher); and a conversation reshaped for gpt-oss's template.
#include <gtest/gtest.h>

#include "byte_grammar.h"
#include "server/harmony.h"
#include "server/reasoning.h"
#include "server/response_format.h"
#include "server/tool_calls.h"

namespace pith::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct Read {
  std::string reasoning, content;
  std::vector<HarmonyReader::Addressed> addressed;
};

// The output pushed in pieces of `piece` bytes (0: whole).
Read read(std::string_view text, size_t piece = 0) {
  HarmonyReader r;
  Read out;
  auto take = [&](const HarmonyReader::Delta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
  };
  if (piece == 0) piece = text.size() + 1;
  for (size_t at = 0; at < text.size(); at += piece) take(r.push(text.substr(at, piece)));
  take(r.finish());
  out.addressed = r.addressed();
  return out;
}

const char* kThoughtAndCall =
    "<|channel|>analysis<|message|>Need the weather; a < b.<|end|><|start|>assistant<|channel|>"
    "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}";

TEST(HarmonyReader, AnalysisThenFinal) {
  const Read r = read(
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>"
      "final<|message|>Sunny <b>today</b>.");
  EXPECT_EQ(r.reasoning, "Think.");
  EXPECT_EQ(r.content, "Sunny <b>today</b>.");
  EXPECT_TRUE(r.addressed.empty());
}

TEST(HarmonyReader, CallsInBothHeaderForms) {
  const Read a = read(kThoughtAndCall);
  EXPECT_EQ(a.reasoning, "Need the weather; a < b.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.addressed.size(), 1u);
  EXPECT_EQ(a.addressed[0].recipient, "functions.get_weather");
  EXPECT_EQ(a.addressed[0].channel, "commentary");
  EXPECT_EQ(a.addressed[0].body, R"({"city": "Paris"})");
  EXPECT_FALSE(a.addressed[0].ended);  // <|call|> is a control token: not in the text
  // As the template writes calls back: the recipient before the channel, and a rendered end.
  const Read b = read(" to=functions.lookup<|channel|>commentary json<|message|>{}<|call|>");
  ASSERT_EQ(b.addressed.size(), 1u);
  EXPECT_EQ(b.addressed[0].recipient, "functions.lookup");
  EXPECT_EQ(b.addressed[0].channel, "commentary");
  EXPECT_EQ(b.addressed[0].body, "{}");
  EXPECT_TRUE(b.addressed[0].ended);
}

TEST(HarmonyReader, EverySplitOfTheStreamReadsAlike) {
  const std::string text = std::string(kThoughtAndCall) +
                           "<|end|>\n<|start|>assistant<|channel|>commentary<|message|>Checking."
                           "<|end|><|start|>assistant<|channel|>final<|message|>Done <|x";
  const Read whole = read(text);
  EXPECT_EQ(whole.content, "Checking.\n\nDone <|x");
  for (size_t piece = 1; piece < 24; ++piece) {
    const Read r = read(text, piece);
    EXPECT_EQ(r.reasoning, whole.reasoning) << piece;
    EXPECT_EQ(r.content, whole.content) << piece;
    ASSERT_EQ(r.addressed.size(), 1u) << piece;
    EXPECT_EQ(r.addressed[0].body, whole.addressed[0].body) << piece;
  }
  // Two pieces, split anywhere.
  for (size_t at = 0; at <= text.size(); ++at) {
    HarmonyReader r;
    std::string reasoning, content;
    for (const auto& d : {r.push(std::string_view(text).substr(0, at)),
                          r.push(std::string_view(text).substr(at)), r.finish()}) {
      reasoning += d.reasoning;
      content += d.content;
    }
    EXPECT_EQ(reasoning, whole.reasoning) << at;
    EXPECT_EQ(content, whole.content) << at;
  }
}

TEST(HarmonyReader, TextWithoutHeadersIsContent) {
  EXPECT_EQ(read("Hello <world>").content, "Hello <world>");
  EXPECT_EQ(read(" to be or not").content, " to be or not");
  EXPECT_EQ(read("<|cha").content, "<|cha");  // still possibly a header when the output ended
  // A "header" that runs on without <|message|> was text.
  const std::string runaway = "<|channel|>" + std::string(300, 'x');
  EXPECT_EQ(read(runaway).content, runaway);
  EXPECT_EQ(read("<|channel|>oops<|end|>then").content, "<|channel|>oops\n\nthen");
}

TEST(HarmonyReader, CutShortAndMissingEnds) {
  // Generation ended inside a header: no text; inside a thought: reasoning.
  EXPECT_EQ(read("<|channel|>analy").content, "");
  EXPECT_EQ(read("<|channel|>analy").reasoning, "");
  EXPECT_EQ(read("<|channel|>analysis<|message|>Still thinking").reasoning, "Still thinking");
  // <|start|> without <|end|> before it still starts the next message.
  const Read r = read(
      "<|channel|>analysis<|message|>x<|start|>assistant<|channel|>final"
      "<|message|>y");
  EXPECT_EQ(r.reasoning, "x");
  EXPECT_EQ(r.content, "y");
  // Messages of other channels are content; built-in tools are addressed messages too.
  const Read tool = read("<|channel|>analysis to=python code<|message|>print(1)");
  ASSERT_EQ(tool.addressed.size(), 1u);
  EXPECT_EQ(tool.addressed[0].recipient, "python");
  EXPECT_EQ(tool.addressed[0].channel, "analysis");
  EXPECT_EQ(tool.reasoning, "");
}

ToolRequest weather_request(const char* choice = "\"auto\"") {
  const json body = {{"tools",
                      {{{"type", "function"},
                        {"function",
                         {{"name", "get_weather"},
                          {"parameters",
                           {{"type", "object"},
                            {"properties", {{"city", {{"enum", {"Paris", "Tokyo"}}}}}},
                            {"required", {"city"}}}}}}},
                       {{"type", "function"}, {"function", {{"name", "noop"}}}}}},
                     {"tool_choice", json::parse(choice)}};
  return parse_tool_request(body, nullptr);
}

TEST(HarmonyToolCalls, DeclaredFunctionsWithObjectArguments) {
  const ToolRequest r = weather_request();
  const std::vector<HarmonyReader::Addressed> addressed = {
      {"functions.get_weather", "commentary", R"({"city": "Paris"})", false},
      {"functions.unknown", "commentary", R"({"a": 1})", true},
      {"functions.noop", "commentary", "not json", true},
      {"python", "analysis", "print(1)", true}};
  const ParsedToolOutput out = harmony_tool_calls(addressed, &r);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(out.content, "{\"a\": 1}\n\nnot json\n\nprint(1)");
  // Without tools, nothing is a call.
  EXPECT_TRUE(harmony_tool_calls(addressed, nullptr).calls.empty());
  // The whole-output parser (used when reasoning is not split): calls and the content around.
  const ParsedToolOutput whole =
      parse_tool_output(std::string("<|channel|>commentary<|message|>Checking.<|end|>"
                                    "<|start|>assistant") +
                            " to=functions.get_weather<|channel|>commentary json<|message|>"
                            R"({"city":"Tokyo"})",
                        ToolCallFormat::Harmony, r);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].arguments, R"({"city":"Tokyo"})");
  EXPECT_EQ(whole.content, "Checking.");
  const std::string plain = "<|channel|>final<|message|>Hi";
  EXPECT_EQ(parse_tool_output(plain, ToolCallFormat::Harmony, r).content, plain);
  EXPECT_TRUE(may_become_tool_call("<|channel|>analysis<|message|>x", ToolCallFormat::Harmony));
  EXPECT_FALSE(may_become_tool_call("<|channel|>final<|message|>x", ToolCallFormat::Harmony));
}

TEST(HarmonyGrammar, ForcedCallsAfterAnOptionalThought) {
  const ByteGrammar required(
      tool_call_grammar(weather_request("\"required\""), ToolCallFormat::Harmony));
  const std::string call =
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"})";
  EXPECT_TRUE(required.matches(call));
  EXPECT_TRUE(
      required.matches("<|channel|>analysis<|message|>a < b, so Paris.<|end|>"
                       "<|start|>assistant" +
                       call));
  EXPECT_TRUE(
      required.matches("<|channel|>commentary to=functions.noop <|constrain|>json<|message|>{}"));
  EXPECT_FALSE(required.matches(  // the schema holds
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Rome"})"));
  EXPECT_FALSE(
      required.matches("<|channel|>commentary to=functions.other <|constrain|>json<|message|>{}"));
  EXPECT_FALSE(required.matches(call + call));  // one call per turn
  EXPECT_FALSE(required.matches("<|channel|>final<|message|>Hi"));
  const ByteGrammar named(
      tool_call_grammar(weather_request(R"({"type": "function", "function": {"name": "noop"}})"),
                        ToolCallFormat::Harmony));
  EXPECT_FALSE(named.matches(call));
  EXPECT_TRUE(
      named.matches("<|channel|>commentary to=functions.noop <|constrain|>json<|message|>{}"));
}

TEST(HarmonyGrammar, ResponseFormatIsTheFinalMessage) {
  const ByteGrammar g(harmony_answer_grammar(
      response_format_grammar(json{{"type", "json_schema"},
                                   {"json_schema",
                                    {{"name", "n"},
                                     {"schema",
                                      {{"type", "object"},
                                       {"properties", {{"n", {{"type", "integer"}}}}},
                                       {"required", {"n"}}}}}}},
                              nullptr)));
  EXPECT_TRUE(g.matches(R"(<|channel|>final<|message|>{"n": 3})"));
  EXPECT_TRUE(g.matches(
      R"(<|channel|>analysis<|message|>Three.<|end|><|start|>assistant<|channel|>final<|message|>{"n": 3})"));
  EXPECT_FALSE(g.matches(R"({"n": 3})"));
  EXPECT_FALSE(g.matches(R"(<|channel|>final<|message|>{"n": "3"})"));
}

TEST(HarmonyTurns, ThoughtsAsThinkingAndOneCallPerMessage) {
  auto call = [](const char* id, const char* name) {
    return ordered_json{{"id", id},
                        {"type", "function"},
                        {"function", {{"name", name}, {"arguments", ordered_json::object()}}}};
  };
  const ordered_json messages = ordered_json::array(
      {{{"role", "user"}, {"content", "Go"}},
       {{"role", "assistant"},
        {"content", "Preamble."},
        {"reasoning_content", "Two lookups."},
        {"tool_calls", {call("a", "first"), call("b", "second")}}},
       {{"role", "tool"}, {"tool_call_id", "b"}, {"content", "B"}},
       {{"role", "tool"}, {"tool_call_id", "a"}, {"content", "A"}},
       {{"role", "assistant"}, {"content", "Done."}, {"reasoning_content", "Both back."}}});
  const ordered_json out = harmony_turns(messages);
  ASSERT_EQ(out.size(), 6u) << out.dump();
  EXPECT_EQ(out[1]["thinking"], "Two lookups.");
  EXPECT_EQ(out[1]["content"], "");  // the template takes a thought or text, not both
  EXPECT_FALSE(out[1].contains("reasoning_content"));
  EXPECT_EQ(out[1]["tool_calls"].size(), 1u);
  EXPECT_EQ(out[1]["tool_calls"][0]["function"]["name"], "first");
  EXPECT_EQ(out[2]["content"], "A");  // matched by id
  EXPECT_EQ(out[3]["tool_calls"][0]["function"]["name"], "second");
  EXPECT_FALSE(out[3].contains("thinking"));
  EXPECT_EQ(out[4]["content"], "B");
  EXPECT_EQ(out[5]["thinking"], "Both back.");
}

TEST(HarmonyFormats, NamesAndAliases) {
  EXPECT_EQ(parse_reasoning_format("harmony"), ReasoningFormat::Harmony);
  EXPECT_EQ(parse_reasoning_format("openai_gptoss"), ReasoningFormat::Harmony);
  EXPECT_EQ(parse_tool_call_format("harmony"), ToolCallFormat::Harmony);
  EXPECT_EQ(parse_tool_call_format("openai"), ToolCallFormat::Harmony);
  EXPECT_STREQ(reasoning_format_name(ReasoningFormat::Harmony), "harmony");
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::Harmony), "harmony");
  EXPECT_FALSE(is_harmony_template("<|im_start|>{{ message.content }}<|im_end|>"));
}

}  // namespace
}  // namespace pith::server
