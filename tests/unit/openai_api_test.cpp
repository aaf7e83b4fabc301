// The OpenAI surface without a server: request validation, stop-string hold-back while
// streaming, and CompletionSession turning inferlet messages into responses and chunks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "chat_template/chat_template.h"
#include "common/error.h"
#include "server/completion_session.h"
#include "server/openai_api.h"

namespace pith::server {
namespace {

using nlohmann::json;

const Tokenizer& tok() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  return t;
}

const ChatTemplate& tmpl() {
  static const ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] "
      "}}<|end_header_id|>\n\n"
      "{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt "
      "%}<|start_header_id|>assistant"
      "<|end_header_id|>\n\n{% endif %}");
  return t;
}

CompletionRequest parse(const json& body, bool chat = false) {
  return parse_completion_request(body, chat, tok(), tmpl(), 128, 42);
}

TEST(OpenAiRequest, CompletionDefaultsAndTokens) {
  CompletionRequest r = parse({{"prompt", "Hello world"}});
  EXPECT_EQ(r.prompts[0], tok().encode("Hello world", true, false));
  EXPECT_EQ(r.prompts[0].front(), tok().bos_id());
  EXPECT_EQ(r.max_tokens, 16u);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.n, 1u);
  CompletionRequest ids =
      parse({{"prompt", {1, 2, 3}}, {"max_tokens", 4}, {"seed", 9}, {"stop", "x"}});
  EXPECT_EQ(ids.prompts[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids.seed, 9u);
  EXPECT_EQ(ids.stop, std::vector<std::string>{"x"});
  auto args = ids.inferlet_args();
  EXPECT_EQ(args[0], "--tokens");
  EXPECT_EQ(args[1], "1,2,3");
}

TEST(OpenAiRequest, ChatUsesTemplateAndSpecialTokens) {
  CompletionRequest r = parse({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, true);
  std::string text = tok().decode(r.prompts[0]);
  EXPECT_NE(text.find("<|start_header_id|>assistant<|end_header_id|>"), std::string::npos) << text;
  EXPECT_EQ(r.prompts[0].front(), tok().bos_id());
  EXPECT_EQ(r.max_tokens, 128u - r.prompts[0].size());  // chat default: the rest of the context
}

// Every rejection names the request field at fault (OpenAI's "param").
void expect_rejected(const json& body, bool chat, const std::string& param) {
  try {
    parse(body, chat);
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param(), param) << body.dump() << ": " << e.what();
  }
}

TEST(OpenAiRequest, Rejections) {
  auto bad = [](const json& body, const std::string& param, bool chat = false) {
    expect_rejected(body, chat, param);
  };
  bad(json::array(), "");
  bad({{"prompt", nullptr}}, "prompt");
  bad({{"prompt", "x"}, {"temperature", 3}}, "temperature");
  bad({{"prompt", "x"}, {"top_p", 0}}, "top_p");
  bad({{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens");
  bad({{"prompt", "x"}, {"max_tokens", 1000}}, "max_tokens");  // beyond the context
  bad({{"prompt", "x"}, {"n", 0}}, "n");
  bad({{"prompt", "x"}, {"stop", 3}}, "stop");
  bad({{"prompt", {1, -2}}}, "prompt");
  bad({{"prompt", {"a", 2}}}, "prompt");                    // a batch holds strings or token arrays
  bad({{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens");  // 0 only scores, with echo
  bad({{"messages", json::array()}}, "messages", true);
  bad({{"messages", {{{"content", "no role"}}}}}, "messages", true);
  bad({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}}, "top_logprobs",
      true);  // needs logprobs
}

TEST(OpenAiRequest, UnknownAndUnsupportedFieldsAreRefusedByName) {
  const json chat_msgs = {{{"role", "user"}, {"content", "x"}}};
  expect_rejected({{"prompt", "x"}, {"frobnicate", 1}}, false, "frobnicate");
  expect_rejected({{"messages", chat_msgs}, {"tools", json::array({json::object()})}}, true,
                  "tools");
  expect_rejected({{"messages", chat_msgs}, {"response_format", {{"type", "regex"}}}}, true,
                  "response_format");
  const json pattern_schema = json::parse(
      R"j({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
          "pattern": "a(?=b)"}}})j");
  expect_rejected({{"messages", chat_msgs}, {"response_format", pattern_schema}}, true,
                  "response_format");  // a keyword the grammar cannot enforce
  expect_rejected({{"messages", chat_msgs}, {"audio", {{"voice", "alloy"}}}}, true, "audio");
  expect_rejected({{"messages", chat_msgs}, {"modalities", {"text", "audio"}}}, true, "modalities");
  expect_rejected({{"messages", chat_msgs}, {"verbosity", "low"}}, true, "verbosity");
  EXPECT_NO_THROW(
      parse({{"messages", chat_msgs}, {"modalities", {"text"}}, {"verbosity", "medium"}}, true));
  expect_rejected({{"prompt", "x"}, {"suffix", "y"}}, false, "suffix");
  expect_rejected({{"prompt", "x"}, {"echo", "yes"}}, false, "echo");
  expect_rejected({{"prompt", "x"}, {"messages", chat_msgs}}, false, "messages");
  expect_rejected({{"messages", chat_msgs}, {"stream_options", {{"x", true}}}}, true,
                  "stream_options");
  // Fields without an effect on the output are accepted; null means "not set".
  EXPECT_NO_THROW(parse({{"messages", chat_msgs},
                         {"user", "u1"},
                         {"store", false},
                         {"metadata", {{"k", "v"}}},
                         {"tools", nullptr},
                         {"response_format", nullptr}},
                        true));
}

TEST(OpenAiRequest, PredictedOutputs) {
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  CompletionRequest r =
      parse({{"messages", msgs}, {"prediction", {{"type", "content"}, {"content", "a b"}}}}, true);
  EXPECT_EQ(r.prediction, "a b");
  auto args = r.inferlet_args();
  auto at = std::find(args.begin(), args.end(), "--prediction");
  ASSERT_NE(at, args.end());
  EXPECT_EQ(*(at + 1), "a b");
  const json parts = {{{"type", "text"}, {"text", "one "}}, {{"type", "text"}, {"text", "two"}}};
  EXPECT_EQ(parse({{"prompt", "x"}, {"prediction", {{"type", "content"}, {"content", parts}}}})
                .prediction,
            "one two");  // completions too, and text parts joined
  EXPECT_TRUE(parse({{"prompt", "x"}, {"prediction", nullptr}}).prediction.empty());
  const auto no_arg = parse({{"prompt", "x"}}).inferlet_args();
  EXPECT_EQ(std::find(no_arg.begin(), no_arg.end(), "--prediction"), no_arg.end());
  auto bad = [&](const json& p) {
    expect_rejected({{"prompt", "x"}, {"prediction", p}}, false, "prediction");
  };
  bad("text");
  bad({{"type", "text"}, {"content", "a"}});
  bad({{"type", "content"}});
  bad({{"type", "content"}, {"content", 3}});
  bad({{"type", "content"}, {"content", {{{"type", "image_url"}}}}});
  bad({{"type", "content"}, {"content", "a"}, {"extra", 1}});
  bad({{"type", "content"}, {"content", std::string("a\0b", 3)}});
  bad({{"type", "content"}, {"content", std::string(2000, 'x') + " y z"}});  // > the context
}

// `suffix` on a code model: [BOS] <PRE> prompt <SUF> suffix <MID>, for text and token-id
// prompts, batched; on a model without FIM markers only an empty suffix (a plain completion).
TEST(OpenAiRequest, SuffixFillsInTheMiddle) {
  for (const char* vocab : {"ggml-vocab-starcoder.gguf", "ggml-vocab-deepseek-coder.gguf"}) {
    SCOPED_TRACE(vocab);
    const Tokenizer coder =
        Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/" + std::string(vocab));
    const Vocab& v = coder.vocab();
    ASSERT_GE(v.fim_pre_id, 0);
    auto fim = [&](const json& body) {
      return parse_completion_request(body, false, coder, tmpl(), 128, 42);
    };
    auto text = [&](const char* s) { return coder.encode(s, false, false); };
    std::vector<int32_t> want;
    if (coder.add_bos()) want.push_back(coder.bos_id());
    want.push_back(v.fim_pre_id);
    for (int32_t id : text("def add(a, b):\n    ")) want.push_back(id);
    want.push_back(v.fim_suf_id);
    for (int32_t id : text("\n\nprint(add(1, 2))\n")) want.push_back(id);
    want.push_back(v.fim_mid_id);
    CompletionRequest r = fim({{"prompt", {"def add(a, b):\n    ", text("def add(a, b):\n    ")}},
                               {"suffix", "\n\nprint(add(1, 2))\n"}});
    ASSERT_EQ(r.prompts.size(), 2u);
    EXPECT_EQ(r.prompts[0], want);
    EXPECT_EQ(r.prompts[1], want);  // token ids: the same prefix
    EXPECT_EQ(r.echo_texts[0], "def add(a, b):\n    ");
    EXPECT_EQ(fim({{"prompt", "x"}, {"suffix", ""}}).prompts[0].back(), v.fim_mid_id);
    EXPECT_EQ(fim({{"prompt", "x"}, {"suffix", nullptr}}).prompts[0],
              coder.encode("x", true, false));
    try {
      fim({{"prompt", "x"}, {"suffix", "y"}, {"echo", true}});
      ADD_FAILURE() << "echo with a suffix was accepted";
    } catch (const InvalidRequest& e) {
      EXPECT_EQ(e.param(), "echo");
    }
  }
  // A plain model: an empty suffix is a plain completion; any other one is refused by name.
  EXPECT_EQ(parse({{"prompt", "x"}, {"suffix", ""}}).prompts[0], tok().encode("x", true, false));
  expect_rejected({{"prompt", "x"}, {"suffix", 3}}, false, "suffix");
}

TEST(OpenAiRequest, BatchedPromptsAndEcho) {
  CompletionRequest r = parse(
      {{"prompt", {"a b", "c"}}, {"n", 2}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}});
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], tok().encode("c", true, false));
  EXPECT_EQ(r.echo_texts, (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(r.max_tokens, 0u);
  auto args = r.inferlet_args();
  EXPECT_EQ(std::count(args.begin(), args.end(), "--tokens"), 2);
  EXPECT_NE(std::find(args.begin(), args.end(), "--prompt-logprobs"), args.end());
  CompletionRequest ids = parse({{"prompt", {{1, 2}, {3}}}});
  EXPECT_EQ(ids.prompts, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  expect_rejected({{"prompt", {"a", "b"}}, {"n", 40}}, false, "n");  // 80 choices
}

TEST(CompletionSession, EchoWithPromptLogprobsAndNoGeneration) {
  CompletionRequest r = parse(
      {{"prompt", {"Hello world", "Hi"}}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}});
  CompletionSession s(r, tok(), "cmpl-1", "tiny", 1);
  for (uint32_t p = 0; p < 2; ++p) {
    const auto& prompt = r.prompts[p];
    s.on_message("usage " + std::to_string(prompt.size()) + " 0");
    for (size_t i = 0; i < prompt.size(); ++i)
      s.on_message("ptok " + std::to_string(p) + " " + std::to_string(prompt[i]) + " " +
                   (i == 0 ? std::string("none") : "-1.5 " + std::to_string(prompt[i]) + ":-1.5"));
  }
  for (int i = 0; i < 2; ++i) s.on_message("end " + std::to_string(i) + " length 0");
  json resp = s.response();
  ASSERT_EQ(resp["choices"].size(), 2u);
  EXPECT_EQ(resp["choices"][0]["text"], "Hello world");
  EXPECT_EQ(resp["choices"][1]["text"], "Hi");
  const json& lp = resp["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), r.prompts[0].size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].get<double>(), -1.5);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 1u);
  EXPECT_EQ(resp["usage"]["prompt_tokens"], r.prompts[0].size() + r.prompts[1].size());
  EXPECT_EQ(resp["usage"]["completion_tokens"], 0);
}

TEST(OpenAiRequest, SamplingControlsReachTheInferlet) {
  CompletionRequest r = parse({{"prompt", "x"},
                               {"max_tokens", 8},
                               {"presence_penalty", 1.5},
                               {"frequency_penalty", -0.5},
                               {"repetition_penalty", 1.2},
                               {"logit_bias", {{"17", 100}, {"3", -100}}},
                               {"min_tokens", 4},
                               {"ignore_eos", true},
                               {"stop_token_ids", {5, 6}}});
  EXPECT_FLOAT_EQ(r.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(r.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.repetition_penalty, 1.2f);
  EXPECT_EQ(r.min_tokens, 4u);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{5, 6}));
  auto args = r.inferlet_args();
  auto value_of = [&](const std::string& flag) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag) return args[i + 1];
    return std::string("<missing>");
  };
  EXPECT_EQ(value_of("--presence-penalty"), "1.5");
  EXPECT_EQ(value_of("--frequency-penalty"), "-0.5");
  EXPECT_EQ(value_of("--repetition-penalty"), "1.2");
  // nlohmann orders object keys: "17" < "3" as strings.
  EXPECT_EQ(value_of("--logit-bias"), "17:100,3:-100");
  EXPECT_EQ(value_of("--min-tokens"), "4");
  EXPECT_EQ(value_of("--ignore-eos"), "1");
  EXPECT_EQ(value_of("--stop-token-ids"), "5,6");
  // Defaults add no flags: the inferlet then asks for a top-K, not the whole vocabulary.
  auto plain = parse({{"prompt", "x"}}).inferlet_args();
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--logit-bias"), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--presence-penalty"), 0);

  expect_rejected({{"prompt", "x"}, {"presence_penalty", 2.5}}, false, "presence_penalty");
  expect_rejected({{"prompt", "x"}, {"repetition_penalty", 0}}, false, "repetition_penalty");
  expect_rejected({{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, false, "logit_bias");
  expect_rejected({{"prompt", "x"}, {"logit_bias", {{"99999999", 1}}}}, false, "logit_bias");
  expect_rejected({{"prompt", "x"}, {"logit_bias", {{"5", 101}}}}, false, "logit_bias");
  expect_rejected({{"prompt", "x"}, {"min_tokens", 20}}, false, "min_tokens");  // > max_tokens
  expect_rejected({{"prompt", "x"}, {"stop_token_ids", {-1}}}, false, "stop_token_ids");
  expect_rejected({{"prompt", "x"}, {"ignore_eos", "yes"}}, false, "ignore_eos");
}

std::vector<int32_t> ids_of(const std::string& s) {
  return tok().encode(s, false, false);
}

std::string stream_through(ChoiceText& c, const std::string& s) {
  std::string out;
  for (int32_t id : ids_of(s)) out += c.push(id);
  return out;
}

TEST(ChoiceText, StopStringIsCutAndNeverStreamed) {
  ChoiceText c(tok(), {"STOP"});
  std::string out = stream_through(c, "Hello STOP and more");
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(out, "Hello ");
  EXPECT_EQ(c.text(), "Hello ");
  EXPECT_EQ(c.finish(), "");
}

TEST(ChoiceText, HeldBackPrefixIsReleasedWhenItDoesNotMatch) {
  ChoiceText c(tok(), {"ab!"});
  std::string out = stream_through(c, "x ab");
  EXPECT_EQ(out.size() + 2, std::string("x ab").size());  // "ab" could still become "ab!"
  out += stream_through(c, "c");
  out += c.finish();
  EXPECT_FALSE(c.stopped());
  EXPECT_EQ(out, "x abc");
}

TEST(ChoiceText, IncompleteUtf8WaitsForItsLastByte) {
  ChoiceText c(tok(), {});
  std::string all;
  for (int32_t id : ids_of("héllo wörld 🎉")) all += c.push(id);
  all += c.finish();
  EXPECT_EQ(all, "héllo wörld 🎉");
}

TEST(CompletionSession, MessagesBecomeAResponse) {
  CompletionRequest r = parse({{"prompt", "Hi"}, {"max_tokens", 3}, {"logprobs", 2}});
  CompletionSession s(r, tok(), "cmpl-1", "tiny", 7);
  auto ids = ids_of(" one two");
  s.on_message("usage 2 0");
  for (int32_t id : ids)
    s.on_message("tok 0 " + std::to_string(id) + " -0.5 " + std::to_string(id) + ":-0.5,5:-1.5");
  s.on_message("end 0 length " + std::to_string(ids.size()));
  EXPECT_TRUE(s.all_done());
  s.finish();
  json j = s.response();
  EXPECT_EQ(j["choices"][0]["text"], " one two");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], ids.size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), ids.size());
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
  EXPECT_THROW(s.on_message("tok 5 1 -1"), Error);  // no such choice
  EXPECT_THROW(s.on_message("bogus"), Error);
  EXPECT_THROW(s.on_message("error out of KV pages"), Error);
  EXPECT_FALSE(j["usage"].contains("completion_tokens_details"));  // no prediction
}

TEST(CompletionSession, ReturnTokenIdsLikeVllm) {
  const auto ids = ids_of(" one two three");
  auto feed = [&](CompletionSession& s, uint32_t choices) {
    std::vector<json> chunks;
    auto add = [&](std::vector<json> v) { chunks.insert(chunks.end(), v.begin(), v.end()); };
    add(s.on_message("usage 2 0"));
    for (uint32_t c = 0; c < choices; ++c) {
      for (int32_t id : ids) add(s.on_message(fmt::format("tok {} {} -0.5", c, id)));
      add(s.on_message(fmt::format("end {} length {}", c, ids.size())));
    }
    add(s.finish());
    return chunks;
  };
  // Completions: prompt and generated ids on every choice.
  CompletionRequest r =
      parse({{"prompt", {"Hi", "Ho"}}, {"max_tokens", 3}, {"return_token_ids", true}});
  CompletionSession s(r, tok(), "cmpl-1", "tiny", 7);
  feed(s, 2);
  json j = s.response();
  EXPECT_FALSE(j.contains("prompt_token_ids"));
  EXPECT_EQ(j["choices"][1]["prompt_token_ids"], r.prompts[1]);
  EXPECT_EQ(j["choices"][0]["token_ids"], ids);
  // Chat, streamed: the prompt on the first chunk only; the chunks' ids add up to the tokens.
  CompletionRequest c = parse({{"messages", {{{"role", "user"}, {"content", "x"}}}},
                               {"max_tokens", 3},
                               {"stream", true},
                               {"return_token_ids", true}},
                              true);
  CompletionSession cs(c, tok(), "chat-1", "tiny", 7);
  std::vector<json> chunks = feed(cs, 1);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0]["prompt_token_ids"], c.prompts[0]);
  std::vector<int32_t> streamed;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i > 0) {
      EXPECT_FALSE(chunks[i].contains("prompt_token_ids"));
    }
    for (const json& ch : chunks[i]["choices"])
      for (int32_t id : ch["token_ids"]) streamed.push_back(id);
  }
  EXPECT_EQ(streamed, ids);
  EXPECT_EQ(cs.response()["prompt_token_ids"], c.prompts[0]);
  // Without the flag, no such fields.
  CompletionRequest plain = parse({{"prompt", "Hi"}, {"max_tokens", 3}});
  CompletionSession ps(plain, tok(), "cmpl-2", "tiny", 7);
  feed(ps, 1);
  EXPECT_FALSE(ps.response()["choices"][0].contains("token_ids"));
  expect_rejected({{"prompt", "x"}, {"return_token_ids", "yes"}}, false, "return_token_ids");
}

// best_of: best_of candidates per prompt generated (the inferlet's n), the n with the highest
// mean token log-probability returned per prompt, renumbered; usage counts every candidate.
TEST(CompletionSession, BestOfReturnsTheMostLikelyCandidates) {
  CompletionRequest r =
      parse({{"prompt", {"Hi", "Ho"}}, {"n", 2}, {"best_of", 3}, {"max_tokens", 2}});
  EXPECT_EQ(r.n, 3u);
  EXPECT_EQ(r.returned_n, 2u);
  auto args = r.inferlet_args();
  EXPECT_EQ(*(std::find(args.begin(), args.end(), "--n") + 1), "3");
  CompletionSession s(r, tok(), "cmpl-1", "tiny", 7);
  s.on_message("usage 2 0");
  // Mean log-probabilities: prompt 0 -> -1, -0.25, -0.5; prompt 1 -> -2, -2 (tie), -3.
  const double lps[6][2] = {{-1, -1}, {-0.25, -0.25}, {-0.5, -0.5}, {-2, -2}, {-1, -3}, {-3, -3}};
  const auto ids = ids_of(" a b c d e f");
  for (uint32_t c = 0; c < 6; ++c) {
    for (int t = 0; t < 2; ++t) s.on_message(fmt::format("tok {} {} {}", c, ids[c], lps[c][t]));
    s.on_message(fmt::format("end {} length 2", c));
  }
  s.finish();
  json j = s.response();
  ASSERT_EQ(j["choices"].size(), 4u);
  std::vector<std::string> texts;
  for (uint32_t k = 0; k < 4; ++k) {
    EXPECT_EQ(j["choices"][k]["index"], k);
    texts.push_back(j["choices"][k]["text"]);
  }
  auto twice = [&](int c) { return tok().decode(std::vector<int32_t>{ids[c], ids[c]}); };
  EXPECT_EQ(texts, (std::vector<std::string>{twice(1), twice(2), twice(3), twice(4)}));
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);

  expect_rejected({{"prompt", "x"}, {"n", 3}, {"best_of", 2}}, false, "best_of");
  expect_rejected({{"prompt", "x"}, {"best_of", 2}, {"stream", true}}, false, "best_of");
  expect_rejected({{"prompt", {"a", "b", "c", "d", "e"}}, {"best_of", 16}}, false, "best_of");
  CompletionRequest same = parse({{"prompt", "x"}, {"n", 2}, {"best_of", 2}, {"stream", true}});
  EXPECT_EQ(same.returned_n, 0u);  // best_of = n: every candidate, streamable
}

TEST(CompletionSession, PredictionTalliesAddUpInUsage) {
  CompletionRequest r = parse({{"prompt", "Hi"},
                               {"n", 2},
                               {"max_tokens", 3},
                               {"prediction", {{"type", "content"}, {"content", " one"}}}});
  CompletionSession s(r, tok(), "cmpl-1", "tiny", 7);
  s.on_message("usage 2 0");
  const int32_t id = ids_of(" one")[0];
  for (int choice = 0; choice < 2; ++choice) {
    s.on_message(fmt::format("pred {} {} {}", choice, 1 + choice, 4));
    s.on_message(fmt::format("tok {} {} -0.5", choice, id));
    s.on_message(fmt::format("end {} stop 1", choice));
  }
  s.finish();
  const json u = s.response()["usage"];
  EXPECT_EQ(u["completion_tokens_details"]["accepted_prediction_tokens"], 3);
  EXPECT_EQ(u["completion_tokens_details"]["rejected_prediction_tokens"], 8);
  EXPECT_EQ(u["completion_tokens"], 2);
  EXPECT_THROW(s.on_message("pred 2 1 1"), Error);  // no such choice
}

TEST(CompletionSession, ErrorMessagesKeepTheirStatusCode) {
  CompletionRequest r = parse({{"prompt", "Hi"}, {"max_tokens", 3}});
  CompletionSession s(r, tok(), "cmpl-2", "tiny", 7);
  s.on_message(openai_protocol::encode(openai_protocol::UsageMessage{2, 0}));
  EXPECT_FALSE(s.failure());
  EXPECT_TRUE(s.on_message(openai_protocol::encode(openai_protocol::ErrorMessage{
                               PITH_ERR_OUT_OF_KV_PAGES, "decode: out of KV pages"}))
                  .empty());
  ASSERT_TRUE(s.failure());
  EXPECT_EQ(s.failure()->code, PITH_ERR_OUT_OF_KV_PAGES);
  EXPECT_EQ(s.failure()->text, "decode: out of KV pages");
  s.on_message("error 16 later");  // the first failure is the one reported
  EXPECT_EQ(s.failure()->code, PITH_ERR_OUT_OF_KV_PAGES);
  EXPECT_FALSE(s.all_done());
}

TEST(CompletionSession, TokenMessagesAreCountedEvenAfterAStop) {
  CompletionRequest r = parse({{"prompt", "Hi"}, {"max_tokens", 8}});
  CompletionSession s(r, tok(), "cmpl-3", "tiny", 7);
  const int32_t id = ids_of(" one")[0];
  s.on_message("tok 0 " + std::to_string(id) + " -0.5");
  s.on_message("end 0 stop 1");
  s.on_message("tok 0 " + std::to_string(id) + " -0.5");  // after its end: ignored for the text
  EXPECT_EQ(s.token_messages(), 2u);
  EXPECT_EQ(s.completion_tokens(), 1u);
}

TEST(FailureResponse, ChosenByCodeNotText) {
  EXPECT_EQ(failure_response(PITH_ERR_OUT_OF_KV_PAGES).http_status, 503u);
  EXPECT_STREQ(failure_response(PITH_ERR_OUT_OF_KV_PAGES).type, "unavailable");
  EXPECT_EQ(failure_response(PITH_ERR_OUT_OF_EMBEDS).http_status, 503u);
  for (pith_status_t c :
       {PITH_ERR_INTERNAL, PITH_ERR_BAD_ARGUMENT, PITH_ERR_CANCELLED, PITH_ERR_UNSUPPORTED}) {
    EXPECT_EQ(failure_response(c).http_status, 500u) << c;
    EXPECT_STREQ(failure_response(c).type, "internal");
  }
}

TEST(CompletionSession, StreamingChatChunks) {
  CompletionRequest r = parse({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                               {"stream", true},
                               {"max_tokens", 4},
                               {"stream_options", {{"include_usage", true}}}},
                              true);
  CompletionSession s(r, tok(), "chatcmpl-1", "tiny", 7);
  std::string text;
  bool first = true;
  for (int32_t id : ids_of("Yes.")) {
    for (const json& c : s.on_message("tok 0 " + std::to_string(id) + " -0.1")) {
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      if (first) {
        EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
      }
      first = false;
      text += c["choices"][0]["delta"].value("content", "");
    }
  }
  auto last = s.finish();
  ASSERT_EQ(last.size(), 2u);  // finish_reason chunk, then the usage chunk
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last[1]["choices"].empty());
  EXPECT_EQ(last[1]["usage"]["completion_tokens"], ids_of("Yes.").size());
  EXPECT_EQ(text, "Yes.");
}

// Fuzzing finding: `tools[0].type` as an object reached nlohmann's value() (a type_error, a
// 500); members of the wrong type are InvalidRequest (400) naming the field.
TEST(OpenAiRequest, MembersOfTheWrongTypeAreInvalidRequests) {
  const json user = {{"role", "user"}, {"content", "Hi"}};
  const json bodies[] = {
      {{"messages", {user}}, {"tools", {{{"type", json::object()}}}}},
      {{"messages", {user}},
       {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
       {"tool_choice", {{"type", 1}, {"function", {{"name", "f"}}}}}},
      {{"messages", {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}}}},
  };
  for (const json& body : bodies) EXPECT_THROW(parse(body, true), InvalidRequest) << body.dump();
}

// sglang-router and vllm-router forward every request with SGLang/vLLM extension fields at their
// defaults (bodies as they sent them, 2026-11); those are this server's behaviour, so accepted.
// Any other value asks for a behaviour this server does not have: refused by name.
TEST(OpenAiRequest, RouterExtensionFieldsAreAcceptedAtTheirDefaults) {
  const json chat = json::parse(
      R"({"messages":[{"role":"user","content":"hi"}],"model":"m","logprobs":false,
          "max_completion_tokens":5,"stream":true,"no_stop_trim":false,"ignore_eos":false,
          "continue_final_message":false,"skip_special_tokens":true,"separate_reasoning":true,
          "stream_reasoning":true,"return_hidden_states":false,"include_reasoning":true})");
  EXPECT_EQ(parse(chat, true).max_tokens, 5u);
  const json completion = json::parse(
      R"({"model":"m","prompt":"hello there","max_tokens":5,"stream":false,"echo":false,
          "no_stop_trim":false,"ignore_eos":false,"skip_special_tokens":true,
          "return_hidden_states":false})");
  EXPECT_EQ(parse(completion, false).max_tokens, 5u);

  for (const char* field : {"no_stop_trim", "return_hidden_states", "continue_final_message"}) {
    json body = chat;
    body[field] = true;
    try {
      parse(body, true);
      ADD_FAILURE() << field << ": true was accepted";
    } catch (const InvalidRequest& e) {
      EXPECT_EQ(e.param(), field);
    }
  }
  json body = chat;
  body["skip_special_tokens"] = false;
  EXPECT_THROW(parse(body, true), InvalidRequest);
  body = chat;
  body["separate_reasoning"] = "yes";
  EXPECT_THROW(parse(body, true), InvalidRequest);
  body = completion;
  body["continue_final_message"] = false;  // a chat field, unknown on /v1/completions
  EXPECT_THROW(parse(body, false), InvalidRequest);
}

}  // namespace
}  // namespace pith::server
