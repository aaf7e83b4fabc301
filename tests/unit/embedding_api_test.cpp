// /v1/embeddings' request parsing and response (server/embedding_api.h), the messages between the
// embedding inferlet and the server (pith/embedding_protocol.hpp) and the pooling it applies
// (pith/hidden_state.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <pith/embedding_protocol.hpp>
#include <pith/hidden_state.hpp>

#include "server/embedding_api.h"
#include "tokenizer/tokenizer.h"

namespace pith::server {
namespace {

using nlohmann::json;

const Tokenizer& tok() {
  static const Tokenizer t =
      Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  return t;
}

EmbeddingRequest parse(const json& body, uint32_t context = 64, uint32_t hidden = 32) {
  return parse_embedding_request(body, tok(), context, hidden);
}

// The field an InvalidRequest names, "" when the body parses.
std::string refused(const json& body, uint32_t context = 64) {
  try {
    parse(body, context);
  } catch (const InvalidRequest& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    return e.param().empty() ? "(body)" : e.param();
  }
  return "";
}

TEST(EmbeddingRequest, InputForms) {
  const auto one = parse({{"input", "Hello world"}, {"model", "m"}});
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(one.inputs[0], tok().encode("Hello world", true, false));
  EXPECT_EQ(one.model, "m");
  EXPECT_FALSE(one.base64);
  EXPECT_TRUE(one.normalize);
  const auto texts = parse({{"input", {"a", "b c"}}});
  ASSERT_EQ(texts.inputs.size(), 2u);
  EXPECT_EQ(texts.inputs[1], tok().encode("b c", true, false));
  const auto ids = parse({{"input", {5, 6, 7}}});
  EXPECT_EQ(ids.inputs, (std::vector<std::vector<int32_t>>{{5, 6, 7}}));
  const auto batch = parse({{"input", {{5, 6}, {7}}}});
  EXPECT_EQ(batch.inputs, (std::vector<std::vector<int32_t>>{{5, 6}, {7}}));
  // Without special tokens: no BOS.
  const auto plain = parse({{"input", "Hello"}, {"add_special_tokens", false}});
  EXPECT_EQ(plain.inputs[0], tok().encode("Hello", false, false));
  EXPECT_EQ(parse({{"input", "Hello"}}).inputs[0].size(), plain.inputs[0].size() + 1);  // BOS
}

TEST(EmbeddingRequest, OptionsAndArguments) {
  auto r = parse({{"input", {1, 2}},
                  {"encoding_format", "base64"},
                  {"dimensions", 8},
                  {"normalize", false},
                  {"user", "u"}});
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 8u);
  EXPECT_FALSE(r.normalize);
  r.pooling = "mean";
  r.adapter = "ad";
  EXPECT_EQ(r.inferlet_args(),
            (std::vector<std::string>{"--tokens", "1,2", "--pooling", "mean", "--normalize", "0",
                                      "--dimensions", "8", "--adapter", "ad"}));
  // truncate_prompt_tokens keeps the last tokens.
  auto t = parse({{"input", {1, 2, 3, 4, 5}}, {"truncate_prompt_tokens", 2}});
  EXPECT_EQ(t.inputs[0], (std::vector<int32_t>{4, 5}));
  auto whole = parse({{"input", {1, 2, 3, 4, 5}}, {"truncate_prompt_tokens", -1}}, 3);
  EXPECT_EQ(whole.inputs[0], (std::vector<int32_t>{3, 4, 5}));
}

TEST(EmbeddingRequest, RefusesBadRequestsByField) {
  EXPECT_EQ(refused({{"model", "m"}}), "input");
  EXPECT_EQ(refused({{"input", ""}}), "input");
  EXPECT_EQ(refused({{"input", json::array()}}), "input");
  EXPECT_EQ(refused({{"input", {"a", ""}}}), "input");
  EXPECT_EQ(refused({{"input", {{1}, json::array()}}}), "input");
  EXPECT_EQ(refused({{"input", {1, -1}}}), "input");
  EXPECT_EQ(refused({{"input", {1, 1 << 30}}}), "input");
  EXPECT_EQ(refused({{"input", {1.5}}}), "input");
  EXPECT_EQ(refused({{"input", 7}}), "input");
  EXPECT_EQ(refused({{"input", std::vector<int>(65, 1)}}), "input");  // over the context
  EXPECT_EQ(refused({{"input", json(std::vector<std::string>(2049, "a"))}}), "input");
  EXPECT_EQ(refused({{"input", "a"}, {"encoding_format", "binary"}}), "encoding_format");
  EXPECT_EQ(refused({{"input", "a"}, {"dimensions", 0}}), "dimensions");
  EXPECT_EQ(refused({{"input", "a"}, {"dimensions", 33}}), "dimensions");
  EXPECT_EQ(refused({{"input", "a"}, {"dimensions", "8"}}), "dimensions");
  EXPECT_EQ(refused({{"input", "a"}, {"truncate_prompt_tokens", 0}}), "truncate_prompt_tokens");
  EXPECT_EQ(refused({{"input", "a"}, {"truncate_prompt_tokens", 65}}), "truncate_prompt_tokens");
  EXPECT_EQ(refused({{"input", "a"}, {"normalize", 1}}), "normalize");
  EXPECT_EQ(refused({{"input", "a"}, {"model", 3}}), "model");
  EXPECT_EQ(refused({{"input", "a"}, {"user", 3}}), "user");
  EXPECT_EQ(refused({{"input", "a"}, {"temperature", 0}}), "temperature");
  EXPECT_EQ(refused(json::array()), "(body)");
  EXPECT_EQ(refused({{"input", "a"}, {"dimensions", nullptr}, {"encoding_format", nullptr}}), "");
}

TEST(EmbeddingResponse, FloatsOrBase64OfTheirBytes) {
  const std::vector<std::vector<float>> v = {{0.5f, -0.25f, 1e-8f}, {3.0f}};
  json f = embedding_response(v, false, "m", 7);
  EXPECT_EQ(f["object"], "list");
  EXPECT_EQ(f["model"], "m");
  EXPECT_EQ(f["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(f["usage"]["total_tokens"], 7);
  ASSERT_EQ(f["data"].size(), 2u);
  EXPECT_EQ(f["data"][1]["index"], 1);
  EXPECT_EQ(f["data"][1]["object"], "embedding");
  EXPECT_EQ(f["data"][0]["embedding"].get<std::vector<float>>(), v[0]);
  json b = embedding_response(v, true, "m", 7);
  // 0.5f, -0.25f, 1e-8f as little-endian float32 bytes: 00 00 00 3f | 00 00 80 be | 77 cc 2b 32.
  EXPECT_EQ(b["data"][0]["embedding"], "AAAAPwAAgL53zCsy");
  EXPECT_EQ(b["data"][1]["embedding"], "AABAQA==");
}

TEST(EmbeddingProtocol, RoundTripsExactly) {
  for (size_t n : {1, 2, 3, 4, 7}) {
    embedding_protocol::EmbeddingMessage m{3, 11, 4, {}};
    for (size_t i = 0; i < n; ++i) m.values.push_back(std::ldexp(1.0f + i / 7.0f, int(i) - 3));
    const std::string text = embedding_protocol::encode(m);
    embedding_protocol::EmbeddingMessage back;
    std::string why;
    ASSERT_TRUE(embedding_protocol::parse(text, back, why)) << why;
    EXPECT_EQ(back.input, 3u);
    EXPECT_EQ(back.prompt_tokens, 11u);
    EXPECT_EQ(back.cached_tokens, 4u);
    EXPECT_EQ(back.values, m.values);
  }
  embedding_protocol::EmbeddingMessage out;
  std::string why;
  for (const char* bad :
       {"emb 1 2 3", "emb x 2 3 AAAAPw==", "emb 1 2 3 AAAAP",
        "emb 1 2 3 AA*APw==", "emb 1 2 3 AAAA", "emb 1 2 3 AAAAPw== extra", "tok 1 2 3 AAAAPw=="}) {
    EXPECT_FALSE(embedding_protocol::parse(bad, out, why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

TEST(Pooling, LastMeanClsAndUnitLength) {
  const std::vector<std::vector<float>> s = {{1, 0}, {3, 4}, {2, 2}};
  auto pooled = [&](Pooling p) {  // in two chunks, as a long input arrives
    Pooler pooler(p);
    pooler.add({s[0], s[1]});
    pooler.add({s[2]});
    EXPECT_EQ(pooler.count(), 3u);
    return pooler.result();
  };
  EXPECT_EQ(pooled(Pooling::Last), (std::vector<float>{2, 2}));
  EXPECT_EQ(pooled(Pooling::Cls), (std::vector<float>{1, 0}));
  EXPECT_EQ(pooled(Pooling::Mean), (std::vector<float>{2, 2}));
  EXPECT_TRUE(Pooler(Pooling::Mean).result().empty());
  std::vector<float> v = {3, 4, 12};
  truncate_and_normalize(v, 2);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> zero = {0, 0};
  truncate_and_normalize(zero, 0);
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
  Pooling p;
  EXPECT_TRUE(parse_pooling("mean", &p) && p == Pooling::Mean);
  EXPECT_FALSE(parse_pooling("max", &p));
  EXPECT_TRUE(pools_every_token(Pooling::Mean) && !pools_every_token(Pooling::Last));
  // Hidden-state bytes as the host writes them (runtime/distribution_bytes.h).
  std::string bytes;
  for (const auto& h : s) {
    const uint32_t n = 2;
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    bytes.append(reinterpret_cast<const char*>(h.data()), 8);
  }
  EXPECT_EQ(parse_hidden_states(bytes), s);
  EXPECT_EQ(parse_hidden_states(bytes.substr(0, bytes.size() - 1)).size(), 2u);
}

}  // namespace
}  // namespace pith::server
