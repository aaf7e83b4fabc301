// The tokenizers of the model families pith serves, beyond llama.cpp's plain-text vectors
// (tokenizer_vectors_test): BOS added by default, special tokens written in text with and
// without parse_special (and the whitespace Phi-3's tokens swallow), end-of-generation ids.
// The reference is llama.cpp itself, through tools/tokenizer_oracle.py
// (tests/data/tokenizer/special.llama-cpp.json); a few rules are also spelled out by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pith {
namespace {

const std::string kDir = std::string(PITH_TEST_DATA) + "/tokenizer/";

Tokenizer load(const std::string& vocab) {
  GGUFFile f(kDir + vocab);
  return Tokenizer::from_gguf(f);
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

TEST(TokenizerFamilies, MatchLlamaCppOnSpecialTokensBosAndEndOfGeneration) {
  std::ifstream in(kDir + "special.llama-cpp.json");
  ASSERT_TRUE(in.good());
  auto ref = nlohmann::json::parse(in);
  ASSERT_GE(ref.at("vocabs").size(), 10u);
  for (const auto& v : ref.at("vocabs")) {
    const std::string name = v.at("vocab");
    SCOPED_TRACE(name);
    Tokenizer tok = load(name);
    EXPECT_EQ(tok.add_bos(), v.at("add_bos").get<bool>());
    EXPECT_EQ(tok.bos_id(), v.at("bos").get<int32_t>());
    EXPECT_EQ(tok.eos_id(), v.at("eos").get<int32_t>());
    EXPECT_EQ(tok.eos_ids(), v.at("eog").get<std::vector<int32_t>>());
    for (const auto& c : v.at("cases")) {
      const std::string text = c.at("text");
      const bool add = c.at("add_special"), parse = c.at("parse_special");
      auto want = c.at("ids").get<std::vector<int32_t>>();
      auto got = tok.encode(text, add, parse);
      EXPECT_EQ(got, want) << "text '" << text << "' add_special " << add << " parse_special "
                           << parse << "\n got:      " << show(got)
                           << "\n expected: " << show(want);
    }
  }
}

// What each family ends a turn with is an end-of-generation id, whatever the file declares.
TEST(TokenizerFamilies, EndOfTurnTokensStopGeneration) {
  Tokenizer qwen = load("ggml-vocab-qwen2.gguf");
  for (const char* t : {"<|im_end|>", "<|endoftext|>"})
    EXPECT_TRUE(qwen.is_eog(qwen.find_token(t))) << t;
  EXPECT_FALSE(qwen.is_eog(qwen.find_token("<|im_start|>")));
  EXPECT_EQ(qwen.vocab().eot_id, qwen.find_token("<|im_end|>"));

  Tokenizer phi = load("ggml-vocab-phi-3.gguf");  // declares only <|endoftext|> as EOS
  EXPECT_EQ(phi.eos_id(), phi.find_token("<|endoftext|>"));
  for (const char* t : {"<|end|>", "<|endoftext|>", "</s>"})
    EXPECT_TRUE(phi.is_eog(phi.find_token(t))) << t;
  EXPECT_FALSE(phi.is_eog(phi.find_token("<|assistant|>")));
  EXPECT_EQ(phi.vocab().eot_id, phi.find_token("<|end|>"));

  Tokenizer coder = load("ggml-vocab-starcoder.gguf");  // fill-in-the-middle padding stops too
  EXPECT_EQ(coder.eos_ids(), (std::vector<int32_t>{0, coder.find_token("<fim_pad>")}));
}

// Byte-level BPE files that do not say add_bos_token: only the Llama 3 family starts prompts
// with BOS; GPT-2 style files name <|endoftext|> as BOS but never prepend it.
TEST(TokenizerFamilies, BosDefaults) {
  Tokenizer qwen = load("ggml-vocab-qwen2.gguf");
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_EQ(qwen.encode("Hi", true, false), qwen.encode("Hi", false, false));
  EXPECT_FALSE(load("ggml-vocab-gpt-2.gguf").add_bos());
  EXPECT_TRUE(load("ggml-vocab-deepseek-llm.gguf").add_bos());  // says so explicitly
  EXPECT_TRUE(load("ggml-vocab-phi-3.gguf").add_bos());         // SentencePiece default
}

// Phi-3's added tokens swallow the whitespace after them (not <s>, <unk>, <|endoftext|>), so
// its chat format tokenizes without the newlines; stripped or not, decode keeps the tokens.
TEST(TokenizerFamilies, Phi3TokensStripFollowingWhitespace) {
  Tokenizer phi = load("ggml-vocab-phi-3.gguf");
  const int32_t user = phi.find_token("<|user|>"), end = phi.find_token("<|end|>");
  auto ids = phi.encode("<|user|>\n Hi<|end|>\n", false, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{user, phi.find_token("\xE2\x96\x81Hi"), end}));
  EXPECT_EQ(phi.decode(ids), "<|user|>Hi<|end|>");
  // <|endoftext|> keeps it: the newline is text again (SentencePiece "▁" + <0x0A>).
  auto eot = phi.encode("<|endoftext|>\n", false, true);
  ASSERT_EQ(eot.size(), 3u);
  EXPECT_EQ(eot[0], phi.find_token("<|endoftext|>"));
  // Without parse_special control tokens are text and strip nothing.
  EXPECT_EQ(phi.decode(phi.encode("<|user|>\n Hi", false, false)), "<|user|>\n Hi");
}

// lstrip (tokenizer.json flag) removes the whitespace before the token, only from plain text.
TEST(TokenizerFamilies, LstripRemovesWhitespaceBefore) {
  Vocab v = load("ggml-vocab-phi-3.gguf").vocab();
  const int32_t user = 32010;
  ASSERT_EQ(v.tokens[user], "<|user|>");
  v.rstrip_ids.clear();
  v.lstrip_ids = {user};
  Tokenizer t = Tokenizer::from_vocab(std::move(v), "phi-3 with lstrip");
  const int32_t hi = t.find_token("\xE2\x96\x81Hi"), x = t.find_token("\xE2\x96\x81x");
  EXPECT_EQ(t.encode("Hi \t\n<|user|>x", false, true), (std::vector<int32_t>{hi, user, x}));
  EXPECT_EQ(t.encode(" \n<|user|>", false, true), (std::vector<int32_t>{user}));
  EXPECT_EQ(t.encode("<|user|><|user|>", false, true), (std::vector<int32_t>{user, user}));
}

// Gemma 4: <eos>, <turn|> and <|tool_response> (the model stops to wait for a tool's result)
// end generation; "</s>" is ordinary text there; the chat-format markers the chat parser reads
// (<|channel>, <|tool_call>, <|"|>) are user-defined, so they survive decode(skip_special).
TEST(TokenizerFamilies, Gemma4RolesAndMarkers) {
  Tokenizer g = load("ggml-vocab-gemma-4.gguf");
  EXPECT_EQ(g.kind(), VocabKind::MetaspaceBPE);
  EXPECT_TRUE(g.add_bos());
  EXPECT_EQ(g.bos_text(), "<bos>");
  for (const char* t : {"<eos>", "<turn|>", "<|tool_response>"})
    EXPECT_TRUE(g.is_eog(g.find_token(t))) << t;
  for (const char* t : {"</s>", "<|turn>", "<|channel>", "<channel|>", "<|tool_call>"})
    EXPECT_FALSE(g.is_eog(g.find_token(t))) << t;
  EXPECT_EQ(g.token_type(g.find_token("</s>")), TokenType::Normal);
  const std::string turn =
      "<|turn>model\n<|channel>thought\nhm<channel|><|tool_call>call:f{a:<|\"|>x"
      "<|\"|>}<tool_call|><turn|>";
  auto ids = g.encode(turn, false, true);
  EXPECT_EQ(g.decode(ids), turn);
  EXPECT_EQ(
      g.decode(ids, /*skip_special=*/true),
      "model\n<|channel>thought\nhm<channel|><|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>");
}

// A run of newlines that is a token is one id; runs longer than the longest newline token
// merge into several; spaces are "▁"; bytes that are no character are byte tokens.
TEST(TokenizerFamilies, Gemma4NewlineRunsAndSpaces) {
  Tokenizer g = load("ggml-vocab-gemma-4.gguf");
  for (int n = 1; n <= 31; ++n) {
    const std::string run(n, '\n');
    EXPECT_EQ(g.encode(run, false, false), (std::vector<int32_t>{g.find_token(run)})) << n;
  }
  auto long_run = g.encode(std::string(40, '\n'), false, false);
  EXPECT_GT(long_run.size(), 1u);
  EXPECT_EQ(g.decode(long_run), std::string(40, '\n'));
  EXPECT_EQ(g.encode("a  b", false, false),
            (std::vector<int32_t>{g.find_token("a"), g.find_token("\xE2\x96\x81\xE2\x96\x81"),
                                  g.find_token("b")}));
  const std::string bad = "x\xFF\xC3y";
  auto ids = g.encode(bad, false, false);
  EXPECT_EQ(ids[1], g.find_token("<0xFF>"));
  EXPECT_EQ(g.decode(ids), bad);
}

// gpt-oss (harmony): <|end|> closes a reasoning channel and generation goes on; only
// <|return|> and <|call|> end the output.
TEST(TokenizerFamilies, HarmonyEndIsNotEndOfGeneration) {
  auto make = [](bool harmony) {
    Vocab v;
    v.kind = VocabKind::BytePairBPE;
    v.pre = "gpt2";
    for (int b = 0; b < 256; ++b)
      v.tokens.push_back(std::string(1, char('!' + b % 90)) + "_" + std::to_string(b));
    v.types.assign(v.tokens.size(), TokenType::Normal);
    for (const char* t : {"<|end|>", "<|return|>", "<|call|>"}) {
      if (!harmony && std::string(t) != "<|end|>") continue;
      v.tokens.push_back(t);
      v.types.push_back(TokenType::Control);
    }
    return Tokenizer::from_vocab(std::move(v), "synthetic");
  };
  Tokenizer oss = make(true);
  EXPECT_FALSE(oss.is_eog(256));
  EXPECT_TRUE(oss.is_eog(257));
  EXPECT_TRUE(oss.is_eog(258));
  EXPECT_EQ(oss.encode("<|end|>", false, false), (std::vector<int32_t>{256}));  // user-defined
  Tokenizer phi_like = make(false);
  EXPECT_TRUE(phi_like.is_eog(256));
}

// Fill-in-the-middle markers: found by text in StarCoder's and DeepSeek Coder's files (neither
// declares them), control tokens; none for a vocabulary without all three; declared ids win.
TEST(TokenizerFamilies, FillInTheMiddleMarkers) {
  Tokenizer star = load("ggml-vocab-starcoder.gguf");
  EXPECT_EQ(star.vocab().fim_pre_id, star.find_token("<fim_prefix>"));
  EXPECT_EQ(star.vocab().fim_suf_id, star.find_token("<fim_suffix>"));
  EXPECT_EQ(star.vocab().fim_mid_id, star.find_token("<fim_middle>"));
  EXPECT_TRUE(star.is_special(star.vocab().fim_mid_id));
  EXPECT_FALSE(star.is_eog(star.vocab().fim_mid_id));  // the middle follows it
  Tokenizer deepseek = load("ggml-vocab-deepseek-coder.gguf");
  EXPECT_EQ(deepseek.vocab().fim_pre_id, deepseek.find_token("<｜fim▁begin｜>"));
  EXPECT_EQ(deepseek.vocab().fim_suf_id, deepseek.find_token("<｜fim▁hole｜>"));
  EXPECT_EQ(deepseek.vocab().fim_mid_id, deepseek.find_token("<｜fim▁end｜>"));
  for (const char* plain : {"ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf"})
    EXPECT_EQ(load(plain).vocab().fim_pre_id, -1) << plain;

  auto make = [](int32_t declared_pre, bool with_middle) {
    Vocab v;
    v.kind = VocabKind::BytePairBPE;
    v.pre = "gpt2";
    for (int b = 0; b < 256; ++b)
      v.tokens.push_back(std::string(1, char('!' + b % 90)) + "_" + std::to_string(b));
    for (const char* t : {"<PRE>", "<SUF>", "<MID>", "<|fim_prefix|>"})
      if (with_middle || std::string(t) != "<MID>") v.tokens.push_back(t);
    v.types.assign(v.tokens.size(), TokenType::Normal);
    v.fim_pre_id = declared_pre;
    return Tokenizer::from_vocab(std::move(v), "synthetic");
  };
  EXPECT_EQ(make(-1, true).vocab().fim_pre_id, 259);  // <|fim_prefix|> is listed before <PRE>
  EXPECT_EQ(make(256, true).vocab().fim_pre_id, 256);
  EXPECT_EQ(make(256, true).vocab().fim_mid_id, 258);
  Tokenizer partial = make(-1, false);  // no middle marker: no FIM, <PRE> still a control token
  EXPECT_EQ(partial.vocab().fim_pre_id, -1);
  EXPECT_TRUE(partial.is_special(partial.find_token("<SUF>")));
}

}  // namespace
}  // namespace pith
