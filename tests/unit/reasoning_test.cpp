// Reasoning separated from the answer: the splitter under every way of cutting the text into
// streamed pieces, both parsers' rules, detection from real-shaped templates, and a streamed and
// a whole chat response carrying reasoning_content.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "chat_template/chat_template.h"
#include "server/completion_session.h"
#include "server/openai_api.h"
#include "server/reasoning.h"

namespace pith::server {
namespace {

using nlohmann::json;

struct Split {
  std::string reasoning, content;
};

// The text pushed in pieces cut at the given byte positions.
Split split(ReasoningFormat f, const std::string& text, const std::vector<size_t>& cuts) {
  ReasoningSplitter s(f);
  Split out;
  size_t at = 0;
  for (size_t c : cuts) {
    auto d = s.push(std::string_view(text).substr(at, c - at));
    out.reasoning += d.reasoning;
    out.content += d.content;
    at = c;
  }
  auto d = s.push(std::string_view(text).substr(at));
  out.reasoning += d.reasoning;
  out.content += d.content;
  d = s.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  EXPECT_EQ(out.reasoning, s.reasoning());
  EXPECT_EQ(out.content, s.content());
  return out;
}

void expect_split(ReasoningFormat f, const std::string& text, const std::string& reasoning,
                  const std::string& content) {
  Split whole = split(f, text, {});
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  // Every single cut, and random multi-cuts, give the same result.
  for (size_t c = 0; c <= text.size(); ++c) {
    Split s = split(f, text, {c});
    EXPECT_EQ(s.reasoning, reasoning) << text << " cut at " << c;
    EXPECT_EQ(s.content, content) << text << " cut at " << c;
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (rng() % 3 == 0) cuts.push_back(i);
    Split s = split(f, text, cuts);
    EXPECT_EQ(s.reasoning, reasoning) << text;
    EXPECT_EQ(s.content, content) << text;
  }
}

TEST(ReasoningSplitter, Qwen3ThinksOnlyWhenTheOutputOpensAThought) {
  const auto q = ReasoningFormat::Qwen3;
  expect_split(q, "<think>\nLet me see.\n</think>\n\nParis.", "\nLet me see.\n", "\n\nParis.");
  expect_split(q, "Paris.", "", "Paris.");
  expect_split(q, "<thinking is fun", "", "<thinking is fun");
  expect_split(q, "<think>cut short by max_tokens", "cut short by max_tokens", "");
  expect_split(q, "<think></think>Done", "", "Done");
  expect_split(q, "a </think> b", "", "a </think> b");
}

TEST(ReasoningSplitter, DeepSeekR1StartsInsideTheThought) {
  const auto r1 = ReasoningFormat::DeepSeekR1;
  expect_split(r1, "Hmm, 2+2.\n</think>\n\n4", "Hmm, 2+2.\n", "\n\n4");
  expect_split(r1, "<think>\nrepeated tag</think>4", "\nrepeated tag", "4");
  expect_split(r1, "no end tag at all", "no end tag at all", "");
  expect_split(r1, "</think>", "", "");
}

// Gemma 4: thoughts are <|channel>thought ... <channel|> blocks, anywhere in the output.
TEST(ReasoningSplitter, Gemma4ThoughtChannels) {
  const auto g = ReasoningFormat::Gemma4;
  expect_split(g, "<|channel>thought\nLet me see.\n<channel|>Paris.", "Let me see.\n", "Paris.");
  expect_split(g, "Paris.", "", "Paris.");
  // The empty thought it may add after its answer, and one cut short by max_tokens.
  expect_split(g, "Paris.<|channel>thought\n<channel|>", "", "Paris.");
  expect_split(g, "<|channel>thought\ncut short", "cut short", "");
  expect_split(g, "<|channel>thought", "", "");
  expect_split(g, "a<|channel>thought x<channel|>b<|channel>thought y<channel|>c", "xy", "abc");
  // Markers that open no thought are dropped, their text kept.
  expect_split(g, "A<channel|>B", "", "AB");
  expect_split(g, "<|channel>final\nHi", "", "final\nHi");
  expect_split(g, "<|channel><|channel>thought\nx<channel|>y", "x", "y");
  expect_split(g, "a <|chan b <channel", "", "a <|chan b <channel");
  // <think> means nothing to Gemma 4.
  expect_split(g, "<think>x</think>y", "", "<think>x</think>y");
}

// Magistral and Ministral reasoning: qwen3's rule with [THINK] and [/THINK].
TEST(ReasoningSplitter, MistralThinkBlocks) {
  const auto m = ReasoningFormat::Mistral;
  expect_split(m, "[THINK]Let me see.[/THINK]Paris.", "Let me see.", "Paris.");
  expect_split(m, "Paris.", "", "Paris.");
  expect_split(m, "[THINK]cut short by max_tokens", "cut short by max_tokens", "");
  expect_split(m, "[THINK][/THINK]Done", "", "Done");
  expect_split(m, "[THINKING] is not the tag", "", "[THINKING] is not the tag");
  expect_split(m, "<think>x</think>y", "", "<think>x</think>y");
  expect_split(m, "a [/THINK] b", "", "a [/THINK] b");
}

TEST(ReasoningSplitter, NoneLeavesTextAlone) {
  expect_split(ReasoningFormat::None, "<think>x</think>y", "", "<think>x</think>y");
}

TEST(ReasoningFormat, DetectedFromTheTemplate) {
  const ChatTemplate plain(
      "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt "
      "%}<|assistant|>{% endif %}");
  EXPECT_EQ(detect_reasoning_format(plain), ReasoningFormat::None);
  // DeepSeek R1's shape: the generation prompt opens the thought.
  const ChatTemplate r1(
      "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'].split('</think>')"
      "[-1] }}{% else %}{{ m['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt "
      "%}<|Assistant|><think>\n{% endif %}");
  EXPECT_EQ(detect_reasoning_format(r1), ReasoningFormat::DeepSeekR1);
  // Qwen3's shape: knows </think> (to strip old thoughts) but lets the model open one.
  const ChatTemplate q3(
      "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'].split('</think>')"
      "[-1] }}{% else %}{{ m['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt "
      "%}<|im_start|>assistant\n{% endif %}");
  EXPECT_EQ(detect_reasoning_format(q3), ReasoningFormat::Qwen3);
  EXPECT_EQ(parse_reasoning_format("deepseek_r1"), ReasoningFormat::DeepSeekR1);
  EXPECT_EQ(parse_reasoning_format("gemma4"), ReasoningFormat::Gemma4);
  EXPECT_EQ(parse_reasoning_format("mistral"), ReasoningFormat::Mistral);
  EXPECT_FALSE(parse_reasoning_format("o1"));
  // Per prompt, only the <think> formats change.
  EXPECT_EQ(format_for_prompt(ReasoningFormat::Qwen3, true), ReasoningFormat::DeepSeekR1);
  EXPECT_EQ(format_for_prompt(ReasoningFormat::DeepSeekR1, false), ReasoningFormat::Qwen3);
  EXPECT_EQ(format_for_prompt(ReasoningFormat::Gemma4, false), ReasoningFormat::Gemma4);
  EXPECT_EQ(format_for_prompt(ReasoningFormat::Mistral, true), ReasoningFormat::Mistral);
  EXPECT_EQ(format_for_prompt(ReasoningFormat::None, true), ReasoningFormat::None);
}

const Tokenizer& tok() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  return t;
}

CompletionRequest chat_request(bool stream) {
  static const ChatTemplate t(
      "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt "
      "%}assistant:{% endif %}");
  CompletionRequest r = parse_completion_request(
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"stream", stream}}, true, tok(), t,
      128, 42);
  r.reasoning = ReasoningFormat::Qwen3;
  return r;
}

std::vector<std::string> token_messages(const std::string& text) {
  std::vector<std::string> out;
  for (int32_t id : tok().encode(text, false, false))
    out.push_back("tok 0 " + std::to_string(id) + " -0.5");
  return out;
}

// Qwen3.5's published template opens the thought in the generation prompt, and closes it there
// when a request sends chat_template_kwargs {"enable_thinking": false}: each request's rendered
// prompt decides (openai_routes.cpp), so that request's output is all answer.
TEST(ReasoningFormat, Qwen35TemplateAndEnableThinking) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/Qwen3.5-4B.jinja");
  std::stringstream source;
  source << in.rdbuf();
  const ChatTemplate t(source.str());
  EXPECT_EQ(detect_reasoning_format(t), ReasoningFormat::DeepSeekR1);
  json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  EXPECT_TRUE(parse_completion_request(body, true, tok(), t, 128, 42).prompt_opens_thought);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  CompletionRequest off = parse_completion_request(body, true, tok(), t, 128, 42);
  EXPECT_FALSE(off.prompt_opens_thought);
  EXPECT_NE(tok().decode(off.prompts[0]).find("<think>\n\n</think>\n\n"), std::string::npos);
  // The template's own variables cannot be replaced from a request.
  body["chat_template_kwargs"] = {{"messages", json::array()}};
  EXPECT_THROW(parse_completion_request(body, true, tok(), t, 128, 42), InvalidRequest);
  body["chat_template_kwargs"] = "thinking";
  EXPECT_THROW(parse_completion_request(body, true, tok(), t, 128, 42), InvalidRequest);
  EXPECT_TRUE(prompt_opens_thought("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thought("<think>\n\n</think>\n\n"));
}

ChatTemplate template_file(const std::string& name) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/" + name);
  std::stringstream source;
  source << in.rdbuf();
  return ChatTemplate(source.str());
}

// reasoning_effort is the template's thinking switch, as vLLM maps it: "none" renders the prompt
// of enable_thinking false, any other effort that of true (Gemma 4's template thinks only when
// asked); chat_template_kwargs wins; templates without a switch refuse the field by name.
TEST(ReasoningFormat, ReasoningEffortSwitchesThinking) {
  auto prompt = [](const ChatTemplate& t, const json& extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    body.update(extra);
    return parse_completion_request(body, true, tok(), t, 4096, 42).prompts[0];
  };
  auto kwargs = [](bool thinking) {
    return json{{"chat_template_kwargs", {{"enable_thinking", thinking}}}};
  };
  for (const char* name : {"Qwen3.5-4B.jinja", "google-gemma-4-31B-it.jinja"}) {
    SCOPED_TRACE(name);
    const ChatTemplate t = template_file(name);
    EXPECT_EQ(prompt(t, {{"reasoning_effort", "none"}}), prompt(t, kwargs(false)));
    for (const char* effort : {"minimal", "low", "high", "max"})
      EXPECT_EQ(prompt(t, {{"reasoning_effort", effort}}), prompt(t, kwargs(true))) << effort;
    EXPECT_NE(prompt(t, kwargs(true)), prompt(t, kwargs(false)));
    json both = kwargs(true);
    both["reasoning_effort"] = "none";
    EXPECT_EQ(prompt(t, both), prompt(t, kwargs(true)));  // the explicit switch wins
    EXPECT_THROW(prompt(t, {{"reasoning_effort", "extreme"}}), InvalidRequest);
    EXPECT_EQ(prompt(t, {{"reasoning_effort", nullptr}}), prompt(t, json::object()));
  }
  // Gemma 4 does not think by default: an effort turns thinking on.
  const ChatTemplate gemma = template_file("google-gemma-4-31B-it.jinja");
  EXPECT_NE(prompt(gemma, {{"reasoning_effort", "medium"}}), prompt(gemma, json::object()));
  // A template that grades the effort sees the level itself.
  const ChatTemplate graded(
      "{{ 'Reasoning: ' + reasoning_effort }}{% for m in messages %}"
      "{{ m['content'] }}{% endfor %}");
  EXPECT_EQ(tok().decode(prompt(graded, {{"reasoning_effort", "high"}})), "Reasoning: highHi");
  try {
    prompt(template_file("meta-llama-Llama-3.1-8B-Instruct.jinja"), {{"reasoning_effort", "low"}});
    ADD_FAILURE() << "a template without a reasoning switch accepted reasoning_effort";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param(), "reasoning_effort");
  }
}

TEST(CompletionSession, ReasoningContentStreamedAndWhole) {
  const std::string output = "<think>Two and two.</think>Four.";
  CompletionSession whole(chat_request(false), tok(), "chatcmpl-1", "tiny", 1);
  for (const auto& m : token_messages(output)) whole.on_message(m);
  whole.finish();
  json message = whole.response()["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Two and two.");
  EXPECT_EQ(message["content"], "Four.");

  CompletionSession streamed(chat_request(true), tok(), "chatcmpl-2", "tiny", 1);
  std::string reasoning, content;
  auto take = [&](const std::vector<json>& chunks) {
    for (const json& c : chunks) {
      if (c["choices"].empty()) continue;
      const json& d = c["choices"][0]["delta"];
      reasoning += d.value("reasoning_content", "");
      content += d.value("content", "");
      EXPECT_EQ(d.value("content", "").find("think>"), std::string::npos) << c.dump();
    }
  };
  for (const auto& m : token_messages(output)) take(streamed.on_message(m));
  take(streamed.finish());
  EXPECT_EQ(reasoning, "Two and two.");
  EXPECT_EQ(content, "Four.");
}

// Magistral's template (as mistral-common generates it) selects the mistral format; its
// [THINK] and [/THINK] are control tokens, kept in the output text for the splitter (other
// special tokens are left out), and a thought sent back as reasoning_content renders as them.
TEST(CompletionSession, MistralThoughtsBetweenControlTokens) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/templates/mistral-common-v13-thinking.jinja");
  std::stringstream source;
  source << in.rdbuf();
  const ChatTemplate magistral(source.str());
  EXPECT_EQ(detect_reasoning_format(magistral), ReasoningFormat::Mistral);
  const Tokenizer vocab =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/byte-vocab-mistral.gguf");
  const int32_t think = vocab.find_token("[THINK]"), end_think = vocab.find_token("[/THINK]");
  ASSERT_TRUE(think >= 0 && vocab.is_special(think) && end_think >= 0 &&
              vocab.is_special(end_think));

  const json back = {
      {"messages",
       {{{"role", "user"}, {"content", "What is 2+2?"}},
        {{"role", "assistant"}, {"reasoning_content", "Two and two."}, {"content", "4"}},
        {{"role", "user"}, {"content", "And 3+3?"}}}}};
  const CompletionRequest sent = parse_completion_request(back, true, vocab, magistral, 4096, 1);
  const auto& prompt = sent.prompts[0];
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), think), 1);
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), end_think), 1);

  auto request = [&](bool stream) {
    CompletionRequest r = parse_completion_request(
        {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"stream", stream}}, true, vocab,
        magistral, 4096, 1);
    r.reasoning = ReasoningFormat::Mistral;
    return r;
  };
  std::vector<std::string> output;
  auto emit = [&](const std::vector<int32_t>& ids) {
    for (int32_t id : ids) output.push_back("tok 0 " + std::to_string(id) + " -0.5");
  };
  emit({think});
  emit(vocab.encode("Two and two.", false, false));
  emit({end_think});
  emit(vocab.encode("Four.", false, false));

  CompletionSession whole(request(false), vocab, "chatcmpl-1", "magistral", 1);
  for (const auto& m : output) whole.on_message(m);
  whole.finish();
  const json message = whole.response()["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Two and two.");
  EXPECT_EQ(message["content"], "Four.");

  CompletionSession streamed(request(true), vocab, "chatcmpl-2", "magistral", 1);
  std::string reasoning, content;
  auto take = [&](const std::vector<json>& chunks) {
    for (const json& c : chunks) {
      if (c["choices"].empty()) continue;
      const json& d = c["choices"][0]["delta"];
      reasoning += d.value("reasoning_content", "");
      content += d.value("content", "");
    }
  };
  for (const auto& m : output) take(streamed.on_message(m));
  take(streamed.finish());
  EXPECT_EQ(reasoning, "Two and two.");
  EXPECT_EQ(content, "Four.");

  // Without a reasoning format the markers are special tokens like any other: left out.
  CompletionRequest plain = request(false);
  plain.reasoning = ReasoningFormat::None;
  CompletionSession none(plain, vocab, "chatcmpl-3", "magistral", 1);
  for (const auto& m : output) none.on_message(m);
  none.finish();
  EXPECT_EQ(none.response()["choices"][0]["message"]["content"], "Two and two.Four.");
}

}  // namespace
}  // namespace pith::server
