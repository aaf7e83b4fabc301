// Responses API response objects and stream events built from a chat completion's chunks: the
// event order and fields the openai SDK's stream accumulator relies on.
#include <gtest/gtest.h>

#include "server/responses_output.h"

namespace pith::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

ojson echo() {
  return ojson::parse(R"({"instructions": null, "max_output_tokens": 4, "temperature": 1.0,
      "top_p": 1.0, "tools": [], "tool_choice": "auto", "parallel_tool_calls": true,
      "previous_response_id": null, "metadata": {}, "user": null,
      "text": {"format": {"type": "text"}}, "store": true})");
}

json chunk(json delta, json finish_reason = nullptr) {
  return {{"object", "chat.completion.chunk"},
          {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}}}}};
}

std::vector<std::string> types(const std::vector<ojson>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"]);
  return out;
}

TEST(ResponsesOutput, StreamedTextIsOneMessageItemWithSequencedEvents) {
  ResponseBuilder b("resp_1", "m", 7, echo());
  std::vector<ojson> all = b.start();
  for (const json& c :
       {chunk({{"role", "assistant"}, {"content", ""}}), chunk({{"content", "Hel"}}),
        chunk({{"content", "lo"}}), chunk(json::object(), "stop")})
    for (auto& e : b.on_chunk(c)) all.push_back(std::move(e));
  for (auto& e : b.finish({10, 4, 2})) all.push_back(std::move(e));
  EXPECT_EQ(types(all),
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.delta", "response.output_text.delta",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]["sequence_number"], i);
  EXPECT_EQ(all[0]["response"]["status"], "in_progress");
  EXPECT_EQ(all[0]["response"]["output"], ojson::array());
  const ojson item_id = all[2]["item"]["id"];
  EXPECT_TRUE(item_id.get<std::string>().starts_with("msg_"));
  for (size_t i = 3; i < 8; ++i) {
    EXPECT_EQ(all[i]["item_id"], item_id);
    EXPECT_EQ(all[i]["output_index"], 0);
    EXPECT_EQ(all[i]["content_index"], 0);
  }
  EXPECT_EQ(all[4]["delta"], "Hel");
  EXPECT_EQ(all[6]["text"], "Hello");
  EXPECT_EQ(all[8]["item"]["status"], "completed");
  EXPECT_EQ(all[8]["item"]["content"][0]["text"], "Hello");
  const ojson& r = all[9]["response"];
  EXPECT_EQ(r["id"], "resp_1");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["created_at"], 7);
  EXPECT_EQ(r["output"][0]["id"], item_id);
  EXPECT_EQ(r["usage"], ojson::parse(R"({"input_tokens": 10,
      "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 2,
      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12})"));
  EXPECT_EQ(r["max_output_tokens"], 4);
  EXPECT_EQ(r["parallel_tool_calls"], true);
}

TEST(ResponsesOutput, LengthEndsIncomplete) {
  ResponseBuilder b("resp_1", "m", 0, echo());
  b.start();
  b.on_chunk(chunk({{"content", "a"}}));
  b.on_chunk(chunk(json::object(), "length"));
  std::vector<ojson> last = b.finish({1, 0, 4});
  EXPECT_EQ(last.back()["type"], "response.incomplete");
  EXPECT_EQ(last.back()["response"]["status"], "incomplete");
  EXPECT_EQ(last.back()["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(last.back()["response"]["output"][0]["status"], "incomplete");
}

TEST(ResponsesOutput, NoTextStillAnswersAnEmptyMessage) {
  ResponseBuilder b("resp_1", "m", 0, echo());
  b.start();
  std::vector<ojson> last = b.finish({1, 0, 1});
  EXPECT_EQ(types(last),
            (std::vector<std::string>{"response.output_item.added", "response.content_part.added",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  EXPECT_EQ(last.back()["response"]["output"][0]["content"][0]["text"], "");
}

TEST(ResponsesOutput, StreamedToolCallsAreFunctionCallItems) {
  ResponseBuilder b("resp_1", "m", 0, echo());
  b.start();
  json calls = json::parse(R"([{"index": 0, "id": "call_a", "type": "function",
      "function": {"name": "f", "arguments": "{\"x\": 1}"}}])");
  std::vector<ojson> ev = b.on_chunk(chunk({{"role", "assistant"}, {"tool_calls", calls}}));
  EXPECT_EQ(types(ev), (std::vector<std::string>{
                           "response.output_item.added", "response.function_call_arguments.delta",
                           "response.function_call_arguments.done", "response.output_item.done"}));
  EXPECT_EQ(ev[0]["item"]["type"], "function_call");
  EXPECT_EQ(ev[0]["item"]["arguments"], "");
  EXPECT_EQ(ev[1]["delta"], "{\"x\": 1}");
  EXPECT_EQ(ev[2]["arguments"], "{\"x\": 1}");
  EXPECT_EQ(ev[3]["item"]["call_id"], "call_a");
  EXPECT_EQ(ev[3]["item"]["name"], "f");
  EXPECT_EQ(ev[3]["item"]["status"], "completed");
  b.on_chunk(chunk(json::object(), "tool_calls"));
  std::vector<ojson> last = b.finish({1, 0, 5});
  ASSERT_EQ(last.size(), 1u);  // no empty message next to the call
  EXPECT_EQ(last[0]["type"], "response.completed");
  EXPECT_EQ(last[0]["response"]["output"].size(), 1u);
}

TEST(ResponsesOutput, ChatCompletionBecomesOutputItems) {
  ResponseBuilder text("resp_1", "m", 0, echo());
  text.set_chat_completion(json::parse(R"({"choices": [{"index": 0, "finish_reason": "stop",
      "message": {"role": "assistant", "content": "hi"}}]})"),
                           {3, 0, 1});
  ojson r = text.response();
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["incomplete_details"], nullptr);
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["role"], "assistant");
  EXPECT_EQ(r["output"][0]["content"][0],
            ojson::parse(R"({"type": "output_text", "text": "hi", "annotations": []})"));

  ResponseBuilder calls("resp_2", "m", 0, echo());
  calls.set_chat_completion(json::parse(R"({"choices": [{"index": 0,
      "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
      "tool_calls": [{"id": "call_1", "type": "function",
                      "function": {"name": "f", "arguments": "{}"}},
                     {"id": "call_2", "type": "function",
                      "function": {"name": "g", "arguments": "{\"a\":1}"}}]}}]})"),
                            {3, 0, 9});
  r = calls.response();
  ASSERT_EQ(r["output"].size(), 2u);
  EXPECT_EQ(r["output"][1]["type"], "function_call");
  EXPECT_EQ(r["output"][1]["call_id"], "call_2");
  EXPECT_EQ(r["output"][1]["arguments"], "{\"a\":1}");
}

TEST(ResponsesOutput, ThoughtsAreAReasoningItemBeforeTheMessage) {
  ResponseBuilder b("resp_1", "m", 0, echo());
  b.start();
  std::vector<ojson> ev = b.on_chunk(chunk({{"role", "assistant"}, {"reasoning_content", "hm"}}));
  for (auto& e : b.on_chunk(chunk({{"reasoning_content", "m"}, {"content", "Yes"}})))
    ev.push_back(std::move(e));
  for (auto& e : b.on_chunk(chunk(json::object(), "stop"))) ev.push_back(std::move(e));
  for (auto& e : b.finish({1, 0, 3})) ev.push_back(std::move(e));
  EXPECT_EQ(types(ev), (std::vector<std::string>{
                           "response.output_item.added", "response.content_part.added",
                           "response.reasoning_text.delta", "response.reasoning_text.delta",
                           "response.reasoning_text.done", "response.content_part.done",
                           "response.output_item.done", "response.output_item.added",
                           "response.content_part.added", "response.output_text.delta",
                           "response.output_text.done", "response.content_part.done",
                           "response.output_item.done", "response.completed"}));
  EXPECT_EQ(ev[0]["item"]["type"], "reasoning");
  EXPECT_EQ(ev[4]["text"], "hmm");
  EXPECT_EQ(ev[7]["output_index"], 1);
  const ojson& out = ev.back()["response"]["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["content"][0], ojson::parse(R"({"type": "reasoning_text", "text": "hmm"})"));
  EXPECT_EQ(out[1]["content"][0]["text"], "Yes");

  // Unstreamed, the same items from the chat message's reasoning_content.
  ResponseBuilder u("resp_2", "m", 0, echo());
  u.set_chat_completion(json::parse(R"({"choices": [{"index": 0, "finish_reason": "length",
      "message": {"role": "assistant", "content": "", "reasoning_content": "hmm"}}]})"),
                        {1, 0, 3});
  const ojson r = u.response();
  ASSERT_EQ(r["output"].size(), 2u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "");
}

TEST(ResponsesOutput, FailureIsAFailedResponse) {
  ResponseBuilder b("resp_1", "m", 0, echo());
  b.start();
  std::vector<ojson> ev = b.fail("out of KV pages");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "response.failed");
  EXPECT_EQ(ev[0]["sequence_number"], 2);
  EXPECT_EQ(ev[0]["response"]["status"], "failed");
  EXPECT_EQ(ev[0]["response"]["error"]["message"], "out of KV pages");
}

TEST(ResponsesOutput, SseEventNamesItsType) {
  EXPECT_EQ(sse_event(ojson{{"type", "response.created"}, {"sequence_number", 0}}),
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}"
            "\n\n");
}

}  // namespace
}  // namespace pith::server
