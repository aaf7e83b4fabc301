// Responses API requests as the chat completions body they amount to, and the requests refused
// with the field at fault.
#include <gtest/gtest.h>

#include "server/openai_api.h"
#include "server/responses_request.h"

namespace pith::server {
namespace {

using ojson = nlohmann::ordered_json;

std::optional<ojson> no_stored(const std::string&) {
  return std::nullopt;
}

ResponsesRequest translate(const char* body, const ConversationLookup& lookup = no_stored) {
  return translate_responses_request(ojson::parse(body), lookup);
}

std::string refused_param(const char* body) {
  try {
    translate(body);
  } catch (const InvalidRequest& e) {
    return e.param();
  }
  return "(accepted)";
}

TEST(ResponsesRequest, StringInputWithInstructionsIsASystemThenAUserMessage) {
  ResponsesRequest r = translate(
      R"({"model": "m", "input": "hi", "instructions": "be brief", "max_output_tokens": 5,
          "temperature": 0.5, "top_p": 0.9, "stream": true, "user": "u"})");
  EXPECT_EQ(r.chat_body["messages"], ojson::parse(R"([{"role": "system", "content": "be brief"},
                             {"role": "user", "content": "hi"}])"));
  EXPECT_EQ(r.chat_body["model"], "m");
  EXPECT_EQ(r.chat_body["max_completion_tokens"], 5);
  EXPECT_EQ(r.chat_body["temperature"], 0.5);
  EXPECT_EQ(r.chat_body["top_p"], 0.9);
  EXPECT_EQ(r.chat_body["user"], "u");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.echo["instructions"], "be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 5);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
  // The stored conversation has the input, not the instructions (they are not carried over).
  EXPECT_EQ(r.input_items.size(), 1u);
}

TEST(ResponsesRequest, ItemsBecomeMessagesAndToolRoundTrips) {
  ResponsesRequest r = translate(R"({"input": [
      {"role": "developer", "content": "rules"},
      {"type": "message", "role": "user",
       "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}"},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "one"},
      {"type": "function_call_output", "call_id": "c2", "output": "two"},
      {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]})");
  const ojson& m = r.chat_body["messages"];
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], ojson::parse(R"({"role": "system", "content": "rules"})"));
  EXPECT_EQ(m[1]["content"], "ab");
  EXPECT_EQ(m[2]["role"], "assistant");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // consecutive calls: one assistant turn
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(m[3], ojson::parse(R"({"role": "tool", "tool_call_id": "c1", "content": "one"})"));
  EXPECT_EQ(m[4]["tool_call_id"], "c2");
  EXPECT_EQ(m[5], ojson::parse(R"({"role": "assistant", "content": "done"})"));
}

TEST(ResponsesRequest, TextFormatToolsAndToolChoiceTakeTheChatShape) {
  ResponsesRequest r = translate(R"({"input": "x",
      "text": {"format": {"type": "json_schema", "name": "p", "strict": true,
                          "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}},
      "tools": [{"type": "function", "name": "f", "description": "d", "strict": true,
                 "parameters": {"type": "object"}}],
      "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})");
  const ojson& rf = r.chat_body["response_format"];
  EXPECT_EQ(rf["type"], "json_schema");
  EXPECT_EQ(rf["json_schema"]["name"], "p");
  EXPECT_EQ(rf["json_schema"]["strict"], true);
  // Property order as sent (the grammar generates properties in that order).
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"].begin().key(), "b");
  EXPECT_EQ(r.chat_body["tools"], ojson::parse(R"([{"type": "function", "function":
      {"name": "f", "description": "d", "strict": true, "parameters": {"type": "object"}}}])"));
  EXPECT_EQ(r.chat_body["tool_choice"],
            ojson::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(r.chat_body["parallel_tool_calls"], false);
  EXPECT_EQ(translate(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")
                .chat_body["response_format"],
            ojson::parse(R"({"type": "json_object"})"));
  EXPECT_EQ(translate(R"({"input": "x", "text": {"format": {"type": "text"}}})")
                .chat_body["response_format"],
            ojson::parse(R"({"type": "text"})"));
  // reasoning.effort is chat's reasoning_effort, echoed in the response.
  ResponsesRequest effort =
      translate(R"({"input": "x", "reasoning": {"effort": "low", "summary": "auto"}})");
  EXPECT_EQ(effort.chat_body["reasoning_effort"], "low");
  EXPECT_EQ(effort.echo["reasoning"]["effort"], "low");
  EXPECT_FALSE(translate(R"({"input": "x", "reasoning": {"effort": null}})")
                   .chat_body.contains("reasoning_effort"));
  std::string param = "reasoning_effort", message = "'reasoning_effort' must be one of ...";
  responses_wording(param, message);
  EXPECT_EQ(param, "reasoning");
  EXPECT_EQ(message, "'reasoning.effort' must be one of ...");
}

TEST(ResponsesRequest, PreviousResponseIdPutsTheStoredConversationFirst) {
  const ojson before = ojson::parse(R"([{"type": "message", "role": "user", "content": "q1"},
      {"type": "message", "role": "assistant", "content": "a1"}])");
  auto lookup = [&](const std::string& id) -> std::optional<ojson> {
    if (id == "resp_1") return before;
    return std::nullopt;
  };
  ResponsesRequest r = translate(R"({"input": "q2", "previous_response_id": "resp_1"})", lookup);
  ASSERT_EQ(r.chat_body["messages"].size(), 3u);
  EXPECT_EQ(r.chat_body["messages"][1]["content"], "a1");
  EXPECT_EQ(r.chat_body["messages"][2]["content"], "q2");
  EXPECT_EQ(r.input_items.size(), 3u);
  EXPECT_EQ(r.echo["previous_response_id"], "resp_1");
  EXPECT_THROW(translate(R"({"input": "q", "previous_response_id": "resp_2"})", lookup),
               UnknownResponse);
}

TEST(ResponsesRequest, ConversationAfterAddsTheOutputAsInputItems) {
  const ojson output = ojson::parse(R"([
      {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}",
       "status": "completed"}])");
  ojson items = conversation_after(ojson::array(), output);
  EXPECT_EQ(items, ojson::parse(R"([{"type": "message", "role": "assistant", "content": "hello"},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}])"));
}

TEST(ResponsesRequest, ReasoningItemsAreNotShownToTheNextTurn) {
  const ojson output = ojson::parse(R"([
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "hm"}]},
      {"type": "message", "id": "msg_1", "role": "assistant",
       "content": [{"type": "output_text", "text": "yes", "annotations": []}]}])");
  EXPECT_EQ(conversation_after(ojson::array(), output).size(), 1u);
  ojson body = {{"input", ojson::array({{{"role", "user"}, {"content", "q"}}})}};
  for (const auto& item : output) body["input"].push_back(item);
  ResponsesRequest r = translate_responses_request(body, no_stored);
  ASSERT_EQ(r.chat_body["messages"].size(), 2u);
  EXPECT_EQ(r.chat_body["messages"][1], ojson::parse(R"({"role": "assistant", "content": "yes"})"));
}

TEST(ResponsesRequest, RefusesWhatItCannotHonourNamingTheField) {
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": {"summary": "detailed"}})"), "reasoning");
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": {"effort": "low", "x": 1}})"),
            "reasoning");
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": "low"})"), "reasoning");
  EXPECT_EQ(refused_param(R"({"input": "x", "truncation": "auto"})"), "truncation");
  EXPECT_EQ(refused_param(R"({"model": "m"})"), "input");
  EXPECT_EQ(refused_param(R"({"input": []})"), "input");
  EXPECT_EQ(refused_param(R"({"input": [{"role": "user", "content": [{"type": "input_image",
      "image_url": "http://x"}]}]})"),
            "input[0]");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "web_search_call"}]})"), "input[0]");
  EXPECT_EQ(refused_param(R"({"input": [{"role": "tool", "content": "x"}]})"), "input[0]");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "web_search"}]})"), "tools");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "function", "name": "f",
      "bogus": 1}]})"),
            "tools");
  EXPECT_EQ(refused_param(R"({"input": "x", "text": {"format": {"type": "xml"}}})"), "text.format");
  EXPECT_EQ(refused_param(R"({"input": "x", "text": {"verbosity": "low"}})"), "text");
  EXPECT_EQ(refused_param(R"({"input": "x", "tool_choice": {"type": "file_search"}})"),
            "tool_choice");
  EXPECT_EQ(refused_param(R"({"input": "x", "store": "yes"})"), "store");
  EXPECT_EQ(refused_param(R"({"input": "x", "metadata": {"k": 1}})"), "metadata");
  EXPECT_EQ(refused_param(R"({"input": "x", "instructions": 3})"), "instructions");
  EXPECT_EQ(refused_param(R"({"input": "x", "previous_response_id": 3})"), "previous_response_id");
  EXPECT_EQ(refused_param(R"(["x"])"), "");
}

TEST(ResponsesRequest, ChatErrorsAreWordedInResponsesTerms) {
  auto worded = [](std::string param, std::string message) {
    responses_wording(param, message);
    return param + " | " + message;
  };
  EXPECT_EQ(worded("max_completion_tokens", "'max_completion_tokens' must be between 1 and 9"),
            "max_output_tokens | 'max_output_tokens' must be between 1 and 9");
  EXPECT_EQ(worded("max_tokens", "the prompt plus max_tokens (9) exceeds"),
            "max_output_tokens | the prompt plus max_output_tokens (9) exceeds");
  EXPECT_EQ(worded("response_format", "response_format.json_schema needs a non-empty 'name'"),
            "text | text.format needs a non-empty 'name'");
  EXPECT_EQ(worded("messages", "'messages' must be a non-empty array"),
            "input | 'input' must be a non-empty array");
  EXPECT_EQ(worded("temperature", "'temperature' must be between 0 and 2"),
            "temperature | 'temperature' must be between 0 and 2");
}

// Fuzzing finding: a member of the wrong JSON type reached nlohmann's value(), whose type_error
// became a 500; each is a 400 naming the field.
TEST(ResponsesRequest, MembersOfTheWrongTypeAreRefusedNotThrown) {
  EXPECT_EQ(refused_param(R"({"input": [{"type": 3, "role": "user", "content": "x"}]})"),
            "input[0]");
  EXPECT_EQ(refused_param(R"({"input": [{"role": 7, "content": "x"}]})"), "input[0]");
  EXPECT_EQ(
      refused_param(R"({"input": [{"role": "user", "content": [{"type": {}, "text": "x"}]}]})"),
      "input[0]");
  EXPECT_NE(refused_param(R"({"input": "x", "tools": [{"type": []}]})"), "(accepted)");
}

}  // namespace
}  // namespace pith::server
