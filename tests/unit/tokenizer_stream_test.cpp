// StreamDecoder: text comes out only as complete UTF-8, the pieces add up to decode(ids)
// exactly, split characters (byte-level BPE bytes, SentencePiece <0xNN> fallback) are held
// back until complete, and flush() returns what is left. Also the UTF-8 helpers it uses.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pith {
namespace {

const std::string kDir = std::string(PITH_TEST_DATA) + "/tokenizer/";

const Tokenizer& bpe() {
  static const Tokenizer t = Tokenizer::load(kDir + "ggml-vocab-llama-bpe.gguf");
  return t;
}
const Tokenizer& spm() {
  static const Tokenizer t = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  return t;
}

const std::vector<std::string> kTexts = {
    "Hello world",
    "emoji 🦙🚀😶‍🌫️👩‍👩‍👧‍👦 done",
    "中文测试 日本語 한국어",
    "Ünïcödé ∀x∈ℝ",
    "  spaces\n\n\ttabs  ",
    "𝄞𝄢 musical symbols 𓀀 hieroglyph",
    "code() { return 0; }"};

// Streams ids through a decoder; returns the pieces.
std::vector<std::string> stream(const Tokenizer& t, const std::vector<int32_t>& ids,
                                bool skip_special, bool at_start) {
  StreamDecoder d(t, skip_special, at_start);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(d.push(id));
  pieces.push_back(d.flush());
  return pieces;
}

TEST(StreamDecoder, PiecesAreCompleteUtf8AndAddUpToDecode) {
  for (const Tokenizer* t : {&bpe(), &spm()}) {
    for (const auto& text : kTexts) {
      auto ids = t->encode(text, true, false);
      auto pieces = stream(*t, ids, /*skip_special=*/true, /*at_start=*/true);
      std::string all;
      for (const auto& p : pieces) {
        EXPECT_TRUE(utf8::is_valid(p)) << text;
        all += p;
      }
      EXPECT_EQ(all, t->decode(ids, true));
      EXPECT_EQ(all, text);
    }
  }
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  // "🦙" is not a Llama 2 piece: SentencePiece emits 4 byte-fallback tokens for it (after "▁").
  auto ids = spm().encode("🦙", false, false);
  ASSERT_EQ(ids.size(), 5u);
  StreamDecoder d(spm(), false, /*at_text_start=*/true);
  EXPECT_EQ(d.push(ids[0]), "");  // the prepended space is dropped at the start
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.pending(), 1u);
  EXPECT_EQ(d.push(ids[2]), "");
  EXPECT_EQ(d.push(ids[3]), "");
  EXPECT_EQ(d.pending(), 3u);
  EXPECT_EQ(d.push(ids[4]), "🦙");
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.flush(), "");

  // Byte-level BPE: a lone byte token of a multi-byte character.
  int32_t e4 = bpe().find_token("ä");  // byte 0xE4 in GPT-2's mapping
  ASSERT_GE(e4, 0);
  StreamDecoder b(bpe());
  EXPECT_EQ(b.push(e4), "");
  EXPECT_EQ(b.flush(), "\xE4");  // an incomplete tail comes out raw at the end
}

TEST(StreamDecoder, ContinuationKeepsLeadingSpace) {
  auto ids = spm().encode("Paris", false, false);  // "▁Paris"
  StreamDecoder d(spm());                          // continuing after a prompt
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  EXPECT_EQ(out + d.flush(), " Paris");
}

TEST(StreamDecoder, SpecialTokens) {
  std::vector<int32_t> ids{128000, 9906, 128009};
  EXPECT_EQ(stream(bpe(), ids, false, true),
            (std::vector<std::string>{"<|begin_of_text|>", "Hello", "<|eot_id|>", ""}));
  EXPECT_EQ(stream(bpe(), ids, true, true), (std::vector<std::string>{"", "Hello", "", ""}));
}

TEST(StreamDecoder, InvalidBytesPassThroughAndRandomIdsAddUp) {
  std::mt19937 rng(5);
  for (const Tokenizer* t : {&bpe(), &spm()}) {
    for (int round = 0; round < 50; ++round) {
      std::vector<int32_t> ids(rng() % 40);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % t->vocab_size());
      std::string all;
      for (const auto& p : stream(*t, ids, false, true)) all += p;
      EXPECT_EQ(all, t->decode(ids));
    }
  }
}

TEST(StreamDecoder, BadIdLeavesStateUnchanged) {
  StreamDecoder d(spm());
  EXPECT_EQ(d.push(3 + 0xE4), "");  // <0xE4>: first byte of a 3-byte character
  EXPECT_THROW(d.push(32000), Error);
  EXPECT_THROW(d.push(-1), Error);
  EXPECT_EQ(d.push(3 + 0xB8), "");
  EXPECT_EQ(d.push(3 + 0xAD), "中");
}

TEST(Utf8, Helpers) {
  EXPECT_TRUE(utf8::is_valid("abc 中文 🦙"));
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(utf8::is_valid("\xE4\xB8"));          // truncated
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xF0"), 1u);
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\x80"), 0u);  // stray continuation: never valid
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xFF"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length("ab\xED\xA0"), 0u);  // would be a surrogate
  std::string s;
  utf8::append(s, 0x1F999);
  EXPECT_EQ(s, "🦙");
}

}  // namespace
}  // namespace pith
