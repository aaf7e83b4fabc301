// PreTokenizer (PCRE2 regex split) and BpeMerger on their own: the pattern chosen per GGUF
// `tokenizer.ggml.pre`, pieces that always cover the input exactly (including invalid UTF-8
// and huge whitespace runs), and the merge order rules (lowest rank first, leftmost on ties).
// Also a whole model file's tokenizer (the tiny test model's truncated Llama 2 vocab).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pith {
namespace {

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  PreTokenizer p(PreTokenizer::regexes_for(pre));
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  p.split(text, pieces);
  std::vector<std::string> out;
  size_t expect = 0;
  for (auto [off, len] : pieces) {
    EXPECT_EQ(off, expect) << "pieces must be contiguous";
    EXPECT_GT(len, 0u);
    expect = off + len;
    out.push_back(text.substr(off, len));
  }
  EXPECT_EQ(expect, text.size()) << "pieces must cover the text";
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizer, PatternsPerModel) {
  EXPECT_EQ(split("llama-bpe", "Hello1234567 world"), (V{"Hello", "123", "456", "7", " world"}));
  EXPECT_EQ(split("qwen2", "ab12"), (V{"ab", "1", "2"}));
  EXPECT_EQ(split("gpt2", "Hello1234567 world"), (V{"Hello", "1234567", " world"}));
  // Llama 3: case-insensitive contractions, newline handling, spaces kept before words.
  EXPECT_EQ(split("llama-bpe", "I'M here\n\n  ok"), (V{"I", "'M", " here", "\n\n", " ", " ok"}));
  EXPECT_EQ(split("gpt2", "I'M"), (V{"I", "'", "M"}));  // GPT-2 contractions are lower case
  EXPECT_EQ(split("llama-bpe", "нещо на"), (V{"нещо", " на"}));  // \p{L} is Unicode-aware
  EXPECT_THROW(PreTokenizer::regexes_for("made-up"), Error);
  EXPECT_THROW(PreTokenizer("(unclosed"), Error);
  EXPECT_THROW(PreTokenizer(std::vector<std::string>{}), Error);
}

// GPT-4o's pattern (Phi-4-mini, Llama 4) against the `regex` module's findall on texts with
// cased words, contractions, digits, newlines, paths, combining marks, CJK and emoji
// (tests/data/tokenizer/gpt-4o.split.json, tools/pre_tokenizer_oracle.py).
TEST(PreTokenizer, Gpt4oMatchesTheRegexModule) {
  std::ifstream in(std::string(PITH_TEST_DATA) + "/tokenizer/gpt-4o.split.json");
  ASSERT_TRUE(in) << "missing gpt-4o.split.json";
  const nlohmann::json ref = nlohmann::json::parse(in);
  ASSERT_GE(ref["cases"].size(), 20u);
  for (const std::string pre : {"gpt-4o", "llama4"})
    for (const auto& c : ref["cases"])
      EXPECT_EQ(split(pre, c["text"].get<std::string>()), c["pieces"].get<V>())
          << pre << ": " << c["text"];
  // Words split at case changes, contractions kept on them, paths keep their slashes.
  EXPECT_EQ(split("gpt-4o", "CamelCase don'T a/b\n"),
            (V{"Camel", "Case", " don'T", " a", "/b", "\n"}));
}

// Pre-tokenizers made of several regexes: each one splits the pieces of the one before, seeing
// only its own piece.
TEST(PreTokenizer, RegexSequences) {
  // StarCoder: every digit alone first, then GPT-2 (so " 12" keeps no space on its digits).
  EXPECT_EQ(split("starcoder", "ab 12 cd"), (V{"ab", " ", "1", "2", " cd"}));
  // Falcon: punctuation runs first, digits in threes last.
  EXPECT_EQ(split("falcon", "x=1234567!?"), (V{"x", "=", "123", "456", "7", "!?"}));
  // DeepSeek Coder: newlines alone, letters with one leading space, single digits.
  EXPECT_EQ(split("deepseek-coder", "a\n bc 42"), (V{"a", "\n", " bc", " ", "4", "2"}));
  // DeepSeek LLM: digit runs; CJK on its own; trailing spaces only at the end of a piece.
  EXPECT_EQ(split("deepseek-llm", "ab 123 \u4e2d\u6587  "),
            (V{"ab", " ", "123", " ", "\u4e2d\u6587", "  "}));
  // A lookahead stops at the end of the piece being split: the second regex sees "  " alone.
  PreTokenizer p(std::vector<std::string>{"x", R"(\s+(?!\S))"});
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  p.split("  x", pieces);
  EXPECT_EQ(pieces, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 2}, {2, 1}}));
}

TEST(PreTokenizer, InvalidUtf8AndLongRuns) {
  auto pieces = split("llama-bpe", "ab\xff\xfe cd\xc3");
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, "ab\xff\xfe cd\xc3");
  EXPECT_EQ(split("llama-bpe", std::string(200000, ' ')).size(), 1u);
  EXPECT_EQ(split("llama-bpe", std::string(200000, ' ') + "x").size(), 2u);
  EXPECT_EQ(split("gpt2", std::string(100000, 'a')).size(), 1u);
}

TEST(BpeMerger, RankOrderAndTies) {
  BpeMerger m;
  // ids: a=0 b=1 c=2 ab=3 bc=4 abc=5 aa=6
  m.add(1, 2, 4, 0);  // b c → bc (rank 0, first)
  m.add(0, 1, 3, 1);  // a b → ab
  m.add(0, 4, 5, 2);  // a bc → abc
  m.add(0, 0, 6, 3);  // a a → aa
  m.add(0, 0, 2, 9);  // duplicate pair: the first rank is kept
  EXPECT_EQ(m.size(), 4u);
  for (bool naive : {false, true}) {
    auto run = [&](std::vector<int32_t> s) {
      naive ? m.merge_naive(s) : m.merge(s);
      return s;
    };
    EXPECT_EQ(run({0, 1, 2}), (std::vector<int32_t>{5}));  // bc first, then a+bc
    EXPECT_EQ(run({0, 1}), (std::vector<int32_t>{3}));
    EXPECT_EQ(run({0, 0, 0}), (std::vector<int32_t>{6, 0}));  // leftmost on ties
    EXPECT_EQ(run({0, 0, 0, 0}), (std::vector<int32_t>{6, 6}));
    EXPECT_EQ(run({-1, 0, 0}), (std::vector<int32_t>{-1, 6}));  // unknown bytes never merge
    std::vector<int32_t> long_run(40, 0);
    EXPECT_EQ(run(long_run), std::vector<int32_t>(20, 6));
  }
}

// The tiny test models carry the first 1000 Llama 2 pieces: text still round-trips through
// byte fallback, and BOS is added as the model says.
TEST(Tokenizer, TinyModelVocab) {
  Tokenizer t = Tokenizer::load(std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf");
  EXPECT_EQ(t.vocab_size(), 1000u);
  EXPECT_EQ(t.kind(), VocabKind::SentencePiece);
  auto ids = t.encode("Hello world, 🦙!", true, false);
  EXPECT_EQ(ids.front(), 1);
  for (int32_t id : ids) EXPECT_LT(id, 1000);
  EXPECT_EQ(t.decode(ids, true), "Hello world,▁🦙!");
  // That "▁" is not a typo: this truncated vocab has no lone "▁" piece, so the space before
  // the emoji falls back to the bytes of "▁" (E2 96 81), which decode as those bytes — as in
  // llama.cpp and Hugging Face. Text whose spaces all start a known piece round-trips.
  EXPECT_EQ(t.decode(t.encode("Hello world, the", false, false)), "Hello world, the");
}

}  // namespace
}  // namespace pith
