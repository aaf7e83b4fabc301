// Gemma 4 through the OpenAI chat surface without a model: its vocabulary and published template
// (tests/data), the tool-call and reasoning formats chosen from that template, the prompt a
// request renders, and model outputs (as token ids of the real vocabulary) turned into
// responses, whole and streamed: thoughts into reasoning_content, <|tool_call> blocks into
// tool_calls, malformed calls into plain content.
#include <gtest/gtest.h>

#include "chat_replay.h"
#include "chat_template/chat_template.h"
#include "common/read_file.h"
#include "server/completion_session.h"
#include "server/openai_api.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace pith::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const Tokenizer& gemma() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-gemma-4.gguf");
  return t;
}

const ChatTemplate& gemma_template() {
  static const ChatTemplate t(
      read_file(std::string(PITH_TEST_DATA) + "/templates/google-gemma-4-31B-it.jinja"));
  return t;
}

const json kWeather = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
        {"required", {"city"}}}}}}};

// A chat request as the routes build it for a Gemma 4 model (formats from the template).
CompletionRequest chat(json body, bool stream) {
  body["stream"] = stream;
  if (!body.contains("messages"))
    body["messages"] = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const ToolCallFormat format = detect_tool_call_format(gemma_template().source());
  CompletionRequest r =
      parse_completion_request(body, true, gemma(), gemma_template(), 4096, 1, nullptr, format);
  r.reasoning =
      format_for_prompt(detect_reasoning_format(gemma_template()), r.prompt_opens_thought);
  return r;
}

ChatReply run(const CompletionRequest& r, const std::string& output) {
  return replay_chat(r, gemma(), output);
}

TEST(Gemma4Chat, FormatsComeFromTheTemplate) {
  EXPECT_EQ(detect_tool_call_format(gemma_template().source()), ToolCallFormat::Gemma4);
  EXPECT_EQ(detect_reasoning_format(gemma_template()), ReasoningFormat::Gemma4);
  // The vocabulary's own (older) template is recognised the same way.
  EXPECT_EQ(detect_tool_call_format(gemma().chat_template()), ToolCallFormat::Gemma4);
  EXPECT_EQ(detect_reasoning_format(ChatTemplate(gemma().chat_template())),
            ReasoningFormat::Gemma4);
}

TEST(Gemma4Chat, PromptHasOneBosTheToolsAndAClosedThought) {
  CompletionRequest r = chat({{"tools", {kWeather}}}, false);
  const std::vector<int32_t>& ids = r.prompts[0];
  ASSERT_GT(ids.size(), 10u);
  EXPECT_EQ(ids[0], gemma().bos_id());
  EXPECT_NE(ids[1], gemma().bos_id());
  const std::string text = gemma().decode(ids);
  EXPECT_EQ(text.rfind("<bos><|turn>system\n<|tool>declaration:get_weather{", 0), 0u) << text;
  EXPECT_TRUE(text.ends_with("<|turn>model\n<|channel>thought\n<channel|>")) << text;
  EXPECT_EQ(r.reasoning, ReasoningFormat::Gemma4);
  // enable_thinking asks for thoughts: the prompt then leaves the turn open for one.
  CompletionRequest thinking = chat({{"chat_template_kwargs", {{"enable_thinking", true}}}}, false);
  const std::string on = gemma().decode(thinking.prompts[0]);
  EXPECT_NE(on.find("<|think|>"), std::string::npos);
  EXPECT_TRUE(on.ends_with("<|turn>model\n")) << on;
  EXPECT_EQ(thinking.reasoning, ReasoningFormat::Gemma4);
}

TEST(Gemma4Chat, ThoughtAndToolCallWhole) {
  CompletionRequest r = chat({{"tools", {kWeather}}}, false);
  ChatReply reply = run(r,
                        "<|channel>thought\nNeed the weather.<channel|>"
                        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>");
  EXPECT_EQ(reply.finish, "tool_calls");
  EXPECT_EQ(reply.message["reasoning_content"], "Need the weather.");
  ASSERT_EQ(reply.message["tool_calls"].size(), 1u);
  const json& fn = reply.message["tool_calls"][0]["function"];
  EXPECT_EQ(fn["name"], "get_weather");
  EXPECT_EQ(fn["arguments"], R"({"city":"Paris","days":2})");
}

TEST(Gemma4Chat, ThoughtAndToolCallStreamed) {
  CompletionRequest r = chat({{"tools", {kWeather}}}, true);
  ChatReply reply = run(r,
                        "<|channel>thought\nNeed the weather.<channel|>"
                        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>");
  EXPECT_EQ(reply.reasoning, "Need the weather.");
  EXPECT_EQ(reply.streamed, "");  // no marker leaks into content
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(reply.finish, "tool_calls");
}

TEST(Gemma4Chat, PlainAnswerAndMalformedCallStayContent) {
  CompletionRequest r = chat({{"tools", {kWeather}}}, false);
  ChatReply plain = run(r, "Sunny.<|channel>thought\n<channel|>");
  EXPECT_EQ(plain.message["content"], "Sunny.");
  EXPECT_EQ(plain.finish, "stop");
  const std::string broken = "<|tool_call>call:get_weather{city:Paris}<tool_call|>";
  ChatReply bad = run(r, broken);
  EXPECT_EQ(bad.message["content"], broken);
  EXPECT_TRUE(!bad.message.contains("tool_calls") || bad.message["tool_calls"].empty());
  EXPECT_EQ(bad.finish, "stop");
  CompletionRequest s = chat({{"tools", {kWeather}}}, true);
  EXPECT_EQ(run(s, broken).streamed, broken);
  EXPECT_EQ(run(s, "Sunny.").streamed, "Sunny.");
}

// The template early Gemma 4 GGUF files carry (the vocabulary's) reads tool results only as
// `tool_responses` on the calling turn: the conversation is folded into that shape first, and
// renders as transformers renders the folded one (expected strings from transformers 5.24).
TEST(Gemma4Chat, FirstTemplateGetsToolResultsOnTheCallingTurn) {
  const ChatTemplate first(gemma().chat_template());
  EXPECT_TRUE(gemma4_needs_tool_turns(first.source()));
  EXPECT_FALSE(gemma4_needs_tool_turns(gemma_template().source()));
  const json call = {
      {"id", "call_1"},
      {"type", "function"},
      {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}};
  const json user = {{"role", "user"}, {"content", "Weather in Paris?"}};
  const json calls = {{"role", "assistant"}, {"content", "Checking."}, {"tool_calls", {call}}};
  const ordered_json tools =
      ordered_json::array({{{"type", "function"},
                            {"function",
                             {{"name", "get_weather"},
                              {"parameters",
                               {{"type", "object"},
                                {"properties", {{"city", {{"type", "string"}}}}},
                                {"required", {"city"}}}}}}}});
  const std::string head =
      "<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|><|\"|>,parameters:{"
      "properties:{city:{type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT"
      "<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n<|tool_call>"
      "call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>";
  std::string rendered;
  chat_prompt_tokens(
      json::array({user,
                   calls,
                   {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", R"({"temp": 21})"}},
                   {{"role", "assistant"}, {"content", "It is 21 C."}},
                   {{"role", "user"}, {"content", "Thanks"}}}),
      gemma(), first, true, &tools, nullptr, &rendered);
  EXPECT_EQ(rendered, head +
                          "<|tool_response>response:get_weather{temp:21}<tool_response|>It is 21 "
                          "C.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n<|channel>"
                          "thought\n<channel|>");
  chat_prompt_tokens(
      json::array(
          {user, calls, {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}}),
      gemma(), first, true, &tools, nullptr, &rendered);
  EXPECT_EQ(rendered, head +
                          "<|tool_response>response:get_weather{value:<|\"|>sunny<|\"|>}"
                          "<tool_response|><|channel>thought\n<channel|>");
}

TEST(Gemma4Chat, ForcedCallRunsUnderItsGrammar) {
  CompletionRequest r = chat({{"tools", {kWeather}}, {"tool_choice", "required"}}, false);
  EXPECT_NE(r.grammar.find("\"<|tool_call>call:\""), std::string::npos) << r.grammar;
  ChatReply reply = run(r, "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>");
  EXPECT_EQ(reply.finish, "tool_calls");
  ASSERT_EQ(reply.message["tool_calls"].size(), 1u);
}

}  // namespace
}  // namespace pith::server
