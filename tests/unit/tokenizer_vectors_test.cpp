// Byte-exactness against llama.cpp's tokenizer test vectors (tests/data/tokenizer, see its
// README): every input of ggml-vocab-NAME.gguf.inp must give exactly the ids of the .out file
// (no BOS, parse_special = false; SentencePiece prepends its space), with the fast and the naive
// encoder, and decode must give the input back. One vocabulary per model family pith serves.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pith {
namespace {

const std::string kDir = std::string(PITH_TEST_DATA) + "/tokenizer/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases(const std::string& vocab) {
  std::string inp = slurp(kDir + vocab + ".inp");
  std::string out = slurp(kDir + vocab + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(inp.substr(pos, hit - pos));
  if (pos < inp.size()) texts.push_back(inp.substr(pos));  // gemma-4's last input has no separator
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (const auto& t : texts) {
    if (!std::getline(lines, line)) ADD_FAILURE() << vocab << ": fewer .out lines than inputs";
    Case c{t, {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check_vectors(const std::string& vocab) {
  GGUFFile f(kDir + vocab);
  Tokenizer tok = Tokenizer::from_gguf(f);
  auto cases = load_cases(vocab);
  ASSERT_GE(cases.size(), 46u);
  for (const auto& c : cases) {
    auto ids = tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, c.ids) << "input: '" << c.text << "'\n got:      " << show(ids)
                          << "\n expected: " << show(c.ids);
    EXPECT_EQ(tok.decode(ids), c.text);
    EXPECT_EQ(tok.encode_naive(c.text, false, false), c.ids);
  }
}

class TokenizerVectors : public testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectors, MatchLlamaCpp) {
  check_vectors(std::string("ggml-vocab-") + GetParam() + ".gguf");
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerVectors,
                         testing::Values("llama-bpe", "llama-spm", "qwen2", "phi-3", "deepseek-llm",
                                         "deepseek-coder", "falcon", "gpt-2", "starcoder", "qwen35",
                                         "gemma-4"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name;
                           for (const char* c = info.param; *c; ++c)
                             name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return name;
                         });

// Mistral's Tekken, written by tools/make_tekken_vocab.py from mistral-common's tekken JSON, its
// expected ids from mistral-common's own Tekkenizer (tiktoken): llama.cpp ships no Tekken vectors.
TEST(TokenizerVectors, TekkenMatchesMistralCommon) {
  check_vectors("tekken-240911.gguf");
}

}  // namespace
}  // namespace pith
