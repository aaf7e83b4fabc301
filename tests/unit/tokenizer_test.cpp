// Tokenizer behaviour beyond the llama.cpp vectors: round trips on a varied corpus and on
// arbitrary bytes, special tokens and BOS/EOS, token metadata, errors, fast-vs-naive BPE
// parity, and the no-quadratic-blowup bound on long words.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "formats/gguf.h"
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

std::vector<std::string> corpus() {
  return {
      "",
      " ",
      "Hello, world!",
      "  leading and trailing spaces   ",
      "tabs\tand\nnewlines\r\n\r\n\n\n  mixed \t\n",
      "                                                  fifty spaces then text",
      "\n\n\n\n\n\n\n\n",
      "Ünïcödé façade naïve coöperate Ελληνικά русский язык עברית العربية हिन्दी",
      "中文测试：我想在apple工作1314151天～ 日本語のテキスト、カタカナ。한국어 텍스트",
      // clang-format off
      "emoji 🦙🚀😶‍🌫️👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽 keycap 1️⃣",
      // clang-format on
      "int main(int argc, char** argv) {\n    for (int i = 0; i < argc; ++i) printf(\"%s\\n\", "
      "argv[i]);\n    return 0;\n}\n",
      "def f(x):\n\treturn {'a': [1, 2, 3], \"b\": None}  # comment\n",
      "numbers 1 12 123 1234 12345 3.14159 -42 1e-9 0x1F",
      "contractions: I'm you're he's we've they'll she'd DON'T",
      "<|begin_of_text|> <s> </s> [INST] literal special text",
      "mathematics ∀x∈ℝ: x² ≥ 0 ∑ ∫ √ ≈ ≠ ∞ ℵ₀",
      "zero\u200bwidth\u200djoiner\ufeffbom \u00a0nbsp \u3000ideographic",
      "a\u0301 combining e\u0301\u0302 diacritics",
      "mixed🦙llama中文code_snake_case camelCase kebab-case",
      std::string(300, 'x') + " " + std::string(100, ' ') + std::string(50, '\n'),
      "control chars \x01\x02\x07\x1b[0m \x7f end",
  };
}

TEST(Tokenizer, RoundTripCorpusBpe) {
  for (const auto& s : corpus()) EXPECT_EQ(bpe().decode(bpe().encode(s, false, false)), s) << s;
}

TEST(Tokenizer, RoundTripCorpusSpm) {
  for (const auto& s : corpus()) EXPECT_EQ(spm().decode(spm().encode(s, false, false)), s) << s;
}

TEST(Tokenizer, RoundTripWithSpecialTokens) {
  // With BOS added and skip_special, and with specials parsed from the text, text comes back.
  for (const Tokenizer* t : {&bpe(), &spm()}) {
    for (const auto& s : corpus()) {
      EXPECT_EQ(t->decode(t->encode(s, true, false), /*skip_special=*/true), s) << s;
    }
    std::string s = t->bos_text() + "Hello" + t->eos_text() + " world";
    EXPECT_EQ(t->decode(t->encode(s, false, true)), s);
  }
}

// Arbitrary bytes (mostly invalid UTF-8) never crash and come back unchanged: byte-level
// BPE encodes stray bytes as byte tokens, SentencePiece as <0xNN> byte fallback.
TEST(Tokenizer, InvalidUtf8RoundTrips) {
  std::mt19937 rng(7);
  std::vector<std::string> inputs = {"\xff",
                                     "\xc3",
                                     "abc\xe2\x82",
                                     "\xed\xa0\x80 surrogate",
                                     "\xc0\xaf overlong",
                                     "\x80\x80\x80 stray",
                                     "ok\xf4\x90\x80\x80"};
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 256);
    inputs.push_back(s);
  }
  for (const auto& s : inputs) {
    auto a = bpe().encode(s, false, false);
    EXPECT_EQ(bpe().decode(a), s);
    auto b = spm().encode(s, false, false);
    EXPECT_EQ(spm().decode(b), s);
    EXPECT_EQ(bpe().encode_naive(s, false, false), a);
  }
}

TEST(Tokenizer, BosEosAndSpecialParsing) {
  EXPECT_EQ(bpe().bos_id(), 128000);
  EXPECT_EQ(bpe().eos_id(), 128001);
  EXPECT_TRUE(bpe().add_bos());
  EXPECT_EQ(bpe().bos_text(), "<|begin_of_text|>");
  EXPECT_EQ(bpe().eos_text(), "<|end_of_text|>");
  EXPECT_EQ(bpe().encode("Hello world", true, false), (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_EQ(bpe().encode("Hello world", false, false), (std::vector<int32_t>{9906, 1917}));
  // Specials are plain text unless parse_special.
  auto plain = bpe().encode("<|eot_id|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(bpe().encode("<|eot_id|>", false, true), (std::vector<int32_t>{128009}));
  EXPECT_EQ(bpe().encode("a<|start_header_id|>b", false, true),
            (std::vector<int32_t>{64, 128006, 65}));
  // End-of-generation ids: EOS plus end-of-turn tokens.
  for (int32_t id : {128001, 128008, 128009}) EXPECT_TRUE(bpe().is_eog(id)) << id;
  EXPECT_FALSE(bpe().is_eog(128000));
  EXPECT_EQ(bpe().eos_ids(), (std::vector<int32_t>{128001, 128008, 128009}));

  EXPECT_EQ(spm().encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(spm().encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(spm().decode(std::vector<int32_t>{1, 15043, 3186}), "<s>Hello world");
  EXPECT_EQ(spm().decode(std::vector<int32_t>{1, 15043, 3186}, true), "Hello world");
  EXPECT_EQ(spm().eos_ids(), (std::vector<int32_t>{2}));
  EXPECT_TRUE(spm().chat_template().empty());
}

TEST(Tokenizer, TokenMetadata) {
  EXPECT_EQ(bpe().vocab_size(), 128256u);
  EXPECT_EQ(spm().vocab_size(), 32000u);
  EXPECT_EQ(bpe().kind(), VocabKind::BytePairBPE);
  EXPECT_EQ(spm().kind(), VocabKind::SentencePiece);
  EXPECT_EQ(bpe().token_text(1917), "Ġworld");
  EXPECT_EQ(bpe().token_bytes(1917), " world");
  EXPECT_EQ(bpe().token_bytes(128009), "<|eot_id|>");
  EXPECT_TRUE(bpe().is_special(128009));
  EXPECT_FALSE(bpe().is_special(1917));
  EXPECT_EQ(spm().token_text(3186), "▁world");
  EXPECT_EQ(spm().token_bytes(3186), " world");
  EXPECT_EQ(spm().token_bytes(3 + 0x0A), "\n");  // <0x0A>
  EXPECT_EQ(spm().token_type(3 + 0x0A), TokenType::Byte);
  EXPECT_EQ(spm().find_token("▁world"), 3186);
  EXPECT_EQ(spm().find_token("no such token"), -1);
}

TEST(Tokenizer, BadIdsAreErrors) {
  std::vector<int32_t> bad{1, 32000};
  EXPECT_THROW(spm().decode(bad), Error);
  EXPECT_THROW(spm().token_bytes(-1), Error);
  EXPECT_THROW(bpe().token_text(200000), Error);
  EXPECT_THROW(Tokenizer::load(kDir + "does-not-exist.gguf"), Error);
  EXPECT_THROW(Tokenizer::load(kDir + "ggml-vocab-llama-bpe.gguf.inp"), Error);  // not GGUF
}

TEST(Tokenizer, UserDefinedTokensAlwaysMatched) {
  Vocab v;
  v.kind = VocabKind::BytePairBPE;
  v.pre = "gpt2";
  // The 256 byte tokens, a merge, one control and one user-defined token.
  GGUFFile f(kDir + "ggml-vocab-llama-bpe.gguf");
  Vocab full = vocab_from_gguf(f);
  for (size_t i = 0; i < 256; ++i) {
    v.tokens.push_back(full.tokens[i]);
    v.types.push_back(TokenType::Normal);
  }
  v.tokens.push_back("<ctrl>");
  v.types.push_back(TokenType::Control);
  v.tokens.push_back("<user>");
  v.types.push_back(TokenType::UserDefined);
  Tokenizer t = Tokenizer::from_vocab(v, "test vocab");
  auto ids = t.encode("a<user>b<ctrl>", false, false);
  EXPECT_EQ(ids.size(), 1u + 1 + 1 + 6);
  EXPECT_EQ(ids[1], 257);
  EXPECT_EQ(t.encode("<ctrl>", false, true), (std::vector<int32_t>{256}));
  EXPECT_EQ(t.decode(ids), "a<user>b<ctrl>");
}

TEST(Tokenizer, BadVocabIsAnError) {
  Vocab v;
  EXPECT_THROW(Tokenizer::from_vocab(v, "empty"), Error);
  v.tokens = {"a", "b"};
  v.types = {TokenType::Normal};
  EXPECT_THROW(Tokenizer::from_vocab(v, "short types"), Error);
  v.types = {TokenType::Normal, TokenType::Normal};
  v.bos_id = 5;
  EXPECT_THROW(Tokenizer::from_vocab(v, "bos out of range"), Error);
  v.bos_id = -1;
  v.pre = "no-such-pre";
  EXPECT_THROW(Tokenizer::from_vocab(v, "unknown pre-tokenizer"), Error);
}

// The priority-queue merger gives exactly the naive algorithm's ids.
TEST(Tokenizer, FastMergeEqualsNaive) {
  std::mt19937 rng(11);
  const std::string alphabet[] = {"a",  "b", "e",  "t",    "h",  " ", "in",
                                  "er", "é", "中", "🦙", "\n", "1", "'"};
  for (int i = 0; i < 300; ++i) {
    std::string s;
    int n = rng() % 200;
    for (int k = 0; k < n; ++k) s += alphabet[rng() % std::size(alphabet)];
    EXPECT_EQ(bpe().encode(s, false, false), bpe().encode_naive(s, false, false)) << s;
  }
}

double seconds_to_encode(const Tokenizer& t, const std::string& s) {
  auto t0 = std::chrono::steady_clock::now();
  auto ids = t.encode(s, false, false);
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(t.decode(ids), s);
  return dt;
}

// 100 KB words: no quadratic blow-up (the bound holds under ASan on a slow machine).
TEST(Tokenizer, LongWordsAreNotQuadratic) {
  std::mt19937 rng(3);
  std::string letters(100000, 'a');
  for (auto& c : letters) c = static_cast<char>('a' + rng() % 26);
  std::string same(100000, 'a');
  std::string spaces(100000, ' ');
  std::string cjk;
  while (cjk.size() < 100000) cjk += "中文字";
  for (const Tokenizer* t : {&bpe(), &spm()}) {
    for (const std::string* s : {&letters, &same, &spaces, &cjk}) {
      EXPECT_LT(seconds_to_encode(*t, *s), 2.0);
    }
  }
}

}  // namespace
}  // namespace pith
