// The openai_completion inferlet's message protocol (sdk/include/pith/openai_protocol.hpp), as
// both the inferlet and the server use it: every message survives encode -> parse, and
// malformed text is rejected with a reason instead of being half-read.
#include <gtest/gtest.h>

#include <pith/openai_protocol.hpp>

namespace pith::openai_protocol {
namespace {

Message round_trip(const Message& m) {
  Message out;
  std::string error;
  EXPECT_TRUE(parse(encode(m), out, error)) << encode(m) << ": " << error;
  return out;
}

std::string rejection(std::string_view text) {
  Message out;
  std::string error;
  EXPECT_FALSE(parse(text, out, error)) << "accepted '" << text << "'";
  return error;
}

TEST(OpenAiProtocol, UsageRoundTrips) {
  auto m = std::get<UsageMessage>(round_trip(UsageMessage{4096, 17}));
  EXPECT_EQ(m.prompt_tokens, 4096u);
  EXPECT_EQ(m.cached_tokens, 17u);
  EXPECT_EQ(encode(UsageMessage{2, 0}), "usage 2 0");
}

TEST(OpenAiProtocol, TokenRoundTripsWithAndWithoutAlternatives) {
  auto plain = std::get<TokenMessage>(round_trip(TokenMessage{3, 128000, -0.25, {}}));
  EXPECT_EQ(plain.choice, 3u);
  EXPECT_EQ(plain.token, 128000);
  EXPECT_DOUBLE_EQ(plain.logprob, -0.25);
  EXPECT_TRUE(plain.top.empty());

  TokenMessage with_top{0, 5, -1.5, {{5, -1.5}, {9, -2.125}, {0, -7}}};
  EXPECT_EQ(encode(with_top), "tok 0 5 -1.5 5:-1.5,9:-2.125,0:-7");
  auto back = std::get<TokenMessage>(round_trip(with_top));
  ASSERT_EQ(back.top.size(), 3u);
  EXPECT_EQ(back.top[1].token, 9);
  EXPECT_DOUBLE_EQ(back.top[1].logprob, -2.125);
}

TEST(OpenAiProtocol, LogprobsKeepSixDigitsAndZeroProbabilityIsFinite) {
  auto m = std::get<TokenMessage>(round_trip(TokenMessage{0, 1, -0.123456789, {{2, -INFINITY}}}));
  EXPECT_NEAR(m.logprob, -0.123457, 1e-9);
  EXPECT_DOUBLE_EQ(m.top[0].logprob, -9999.0);
}

TEST(OpenAiProtocol, EndRoundTripsBothReasons) {
  auto stop = std::get<EndMessage>(round_trip(EndMessage{1, FinishReason::Stop, 12}));
  EXPECT_EQ(stop.choice, 1u);
  EXPECT_EQ(stop.reason, FinishReason::Stop);
  EXPECT_EQ(stop.completion_tokens, 12u);
  auto length = std::get<EndMessage>(round_trip(EndMessage{0, FinishReason::Length, 16}));
  EXPECT_EQ(length.reason, FinishReason::Length);
  EXPECT_EQ(encode(length), "end 0 length 16");
}

TEST(OpenAiProtocol, PredictionTallyRoundTrips) {
  auto p = std::get<PredictionMessage>(round_trip(PredictionMessage{2, 15, 3}));
  EXPECT_EQ(p.choice, 2u);
  EXPECT_EQ(p.accepted, 15u);
  EXPECT_EQ(p.rejected, 3u);
  EXPECT_EQ(encode(PredictionMessage{0, 1, 0}), "pred 0 1 0");
  EXPECT_NE(rejection("pred 0 1").find("rejected"), std::string::npos);
  EXPECT_NE(rejection("pred 0 -1 2").find("accepted"), std::string::npos);
  EXPECT_NE(rejection("pred 0 1 2 3").find("trailing"), std::string::npos);
}

TEST(OpenAiProtocol, ErrorCarriesItsStatusCodeAndFreeText) {
  auto e = std::get<ErrorMessage>(
      round_trip(ErrorMessage{PITH_ERR_OUT_OF_KV_PAGES, "decode: out of KV pages"}));
  EXPECT_EQ(e.code, PITH_ERR_OUT_OF_KV_PAGES);
  EXPECT_EQ(e.text, "decode: out of KV pages");
  EXPECT_EQ(encode(ErrorMessage{PITH_ERR_BAD_ARGUMENT, "x"}), "error 3 x");
  auto empty = std::get<ErrorMessage>(round_trip(ErrorMessage{PITH_ERR_INTERNAL, ""}));
  EXPECT_EQ(empty.code, PITH_ERR_INTERNAL);
  EXPECT_EQ(empty.text, "");
}

TEST(OpenAiProtocol, MalformedMessagesAreRejectedWithAReason) {
  EXPECT_NE(rejection("").find("unknown message kind"), std::string::npos);
  EXPECT_NE(rejection("bogus 1 2").find("unknown message kind 'bogus'"), std::string::npos);
  EXPECT_NE(rejection("usage 2").find("cached_tokens"), std::string::npos);
  EXPECT_NE(rejection("usage -1 0").find("prompt_tokens"), std::string::npos);
  EXPECT_NE(rejection("usage 2 0 9").find("trailing"), std::string::npos);
  EXPECT_NE(rejection("usage 99999999999 0").find("prompt_tokens"), std::string::npos);  // > uint32
  EXPECT_NE(rejection("tok 0 5").find("logprob"), std::string::npos);
  EXPECT_NE(rejection("tok x 5 -1").find("choice"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5x -1").find("token"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5 -1e").find("logprob"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5 nan").find("logprob"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5 -1 7").find("alternative"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5 -1 7:-1,:2").find("alternative"), std::string::npos);
  EXPECT_NE(rejection("tok 0 5 -1 7:-1 extra").find("trailing"), std::string::npos);
  EXPECT_NE(rejection("end 0 done 3").find("finish reason"), std::string::npos);
  EXPECT_NE(rejection("end 0 stop").find("completion_tokens"), std::string::npos);
  // The wording of a failure never stands in for its code.
  EXPECT_NE(rejection("error out of KV pages").find("status code"), std::string::npos);
  EXPECT_NE(rejection("error 0 fine").find("status code"), std::string::npos);
}

}  // namespace
}  // namespace pith::openai_protocol
