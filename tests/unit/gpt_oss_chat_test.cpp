// gpt-oss through the OpenAI chat surface without a model: a vocabulary holding its harmony
// tokens (tests/data/tokenizer/byte-vocab-harmony.gguf) and its published template, the formats
// chosen from that template, the prompt a request renders, and model outputs (as token ids)
// turned into responses, whole and streamed: analysis messages into reasoning_content, final
// messages into content, messages addressed to functions into tool_calls.
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

const Tokenizer& harmony_vocab() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/byte-vocab-harmony.gguf");
  return t;
}

const ChatTemplate& gpt_oss_template() {
  static const ChatTemplate t(
      read_file(std::string(PITH_TEST_DATA) + "/templates/openai-gpt-oss-120b.jinja"));
  return t;
}

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}};

// A chat request as the routes build it for a gpt-oss model (formats from the template).
CompletionRequest chat(json body, bool stream) {
  body["stream"] = stream;
  if (!body.contains("messages"))
    body["messages"] = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const ToolCallFormat format = detect_tool_call_format(gpt_oss_template().source());
  CompletionRequest r = parse_completion_request(body, true, harmony_vocab(), gpt_oss_template(),
                                                 4096, 1, nullptr, format);
  r.reasoning =
      format_for_prompt(detect_reasoning_format(gpt_oss_template()), r.prompt_opens_thought);
  return r;
}

ChatReply run(const CompletionRequest& r, const std::string& output) {
  return replay_chat(r, harmony_vocab(), output);
}

const char* kThoughtAndCall =
    "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
    "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";

TEST(GptOssChat, HarmonyTokensAndFormats) {
  const Tokenizer& t = harmony_vocab();
  // The header markers and <|end|> are text the parser reads; <|return|> and <|call|> end
  // generation and are not.
  for (const char* marker :
       {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"}) {
    const int32_t id = t.find_token(marker);
    ASSERT_GE(id, 0) << marker;
    EXPECT_FALSE(t.is_special(id)) << marker;
    EXPECT_FALSE(t.is_eog(id)) << marker;
  }
  for (const char* end : {"<|return|>", "<|call|>"}) {
    EXPECT_TRUE(t.is_special(t.find_token(end))) << end;
    EXPECT_TRUE(t.is_eog(t.find_token(end))) << end;
  }
  EXPECT_EQ(detect_tool_call_format(gpt_oss_template().source()), ToolCallFormat::Harmony);
  EXPECT_EQ(detect_reasoning_format(gpt_oss_template()), ReasoningFormat::Harmony);
}

TEST(GptOssChat, PromptOpensTheAssistantMessage) {
  CompletionRequest r = chat({{"tools", {kWeather}}, {"reasoning_effort", "minimal"}}, false);
  const std::string text = harmony_vocab().decode(r.prompts[0]);
  EXPECT_TRUE(text.starts_with("<|start|>system<|message|>")) << text;
  EXPECT_NE(text.find("Reasoning: low"), std::string::npos) << text;  // minimal: its nearest
  EXPECT_NE(text.find("type get_weather = (_: {"), std::string::npos) << text;
  EXPECT_TRUE(
      text.ends_with("<|start|>user<|message|>Weather in Paris?<|end|>"
                     "<|start|>assistant"))
      << text;
  EXPECT_EQ(r.reasoning, ReasoningFormat::Harmony);
}

TEST(GptOssChat, ThoughtAndAnswer) {
  const std::string output =
      "<|channel|>analysis<|message|>Paris is usually mild.<|end|><|start|>assistant"
      "<|channel|>final<|message|>Mild, around 15 C.<|return|>";
  ChatReply whole = run(chat({}, false), output);
  EXPECT_EQ(whole.message["reasoning_content"], "Paris is usually mild.");
  EXPECT_EQ(whole.message["content"], "Mild, around 15 C.");
  EXPECT_EQ(whole.finish, "stop");
  ChatReply streamed = run(chat({}, true), output);
  EXPECT_EQ(streamed.reasoning, "Paris is usually mild.");
  EXPECT_EQ(streamed.streamed, "Mild, around 15 C.");
}

TEST(GptOssChat, ToolCallWholeAndStreamed) {
  ChatReply whole = run(chat({{"tools", {kWeather}}}, false), kThoughtAndCall);
  EXPECT_EQ(whole.finish, "tool_calls");
  EXPECT_EQ(whole.message["reasoning_content"], "Need the weather.");
  EXPECT_TRUE(whole.message["content"].is_null()) << whole.message;
  ASSERT_EQ(whole.message["tool_calls"].size(), 1u);
  EXPECT_EQ(whole.message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(whole.message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  ChatReply streamed = run(chat({{"tools", {kWeather}}}, true), kThoughtAndCall);
  EXPECT_EQ(streamed.reasoning, "Need the weather.");
  EXPECT_EQ(streamed.streamed, "");  // no header leaks into content
  ASSERT_EQ(streamed.tool_calls.size(), 1u);
  EXPECT_EQ(streamed.tool_calls[0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(streamed.finish, "tool_calls");
}

TEST(GptOssChat, CallsOutsideTheRequestStayContent) {
  // No tools: a message addressed to a function is text, after the rest.
  ChatReply plain = run(chat({}, false), kThoughtAndCall);
  EXPECT_EQ(plain.message["content"], R"({"city":"Paris"})");
  EXPECT_EQ(plain.finish, "stop");
  ChatReply streamed = run(chat({}, true), std::string("<|channel|>final<|message|>Hi.<|end|>") +
                                               "<|start|>assistant to=functions.x<|channel|>"
                                               "commentary json<|message|>{}");
  EXPECT_EQ(streamed.streamed, "Hi.\n\n{}");
  EXPECT_TRUE(streamed.tool_calls.empty());
}

TEST(GptOssChat, ConversationRendersThoughtCallAndResult) {
  const json messages = {
      {{"role", "user"}, {"content", "Weather in Paris?"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"reasoning_content", "Need the weather."},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "15 C"}}};
  CompletionRequest r = chat({{"tools", {kWeather}}, {"messages", messages}}, false);
  const std::string text = harmony_vocab().decode(r.prompts[0]);
  EXPECT_NE(text.find("<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>"
                      "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                      "<|message|>{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather "
                      "to=assistant<|channel|>commentary<|message|>\"15 C\"<|end|>"
                      "<|start|>assistant"),
            std::string::npos)
      << text;
}

TEST(GptOssChat, ForcedCallAndResponseFormatRunUnderTheirGrammars) {
  CompletionRequest forced = chat({{"tools", {kWeather}}, {"tool_choice", "required"}}, false);
  EXPECT_NE(forced.grammar.find("to=functions."), std::string::npos) << forced.grammar;
  ChatReply call = run(forced, kThoughtAndCall);
  EXPECT_EQ(call.finish, "tool_calls");
  ASSERT_EQ(call.message["tool_calls"].size(), 1u);
  CompletionRequest json_answer = chat({{"response_format", {{"type", "json_object"}}}}, false);
  EXPECT_NE(json_answer.grammar.find("<|channel|>final<|message|>"), std::string::npos);
  ChatReply answer = run(json_answer, "<|channel|>final<|message|>{\"a\": 1}<|return|>");
  EXPECT_EQ(answer.message["content"], "{\"a\": 1}");
}

}  // namespace
}  // namespace pith::server
