// Hugging Face tokenizer.json: GGUF vocab → tokenizer.json (write_hf_tokenizer_folder) →
// Tokenizer::from_hf_folder must give the same ids as the GGUF on llama.cpp's vectors and on
// a mixed corpus; the written JSON has the standard structure; hand-written files in the
// other accepted shapes load; broken files are clear errors.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "formats/gguf.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace pith {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kDir = std::string(PITH_TEST_DATA) + "/tokenizer/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

class TempDir {
 public:
  TempDir() {
    path_ = (fs::temp_directory_path() /
             ("pith_tok_" + std::to_string(getpid()) + "_" + std::to_string(counter_++)))
                .string();
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::vector<std::string> vector_inputs(const std::string& vocab) {
  std::string inp = slurp(kDir + vocab + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(inp.substr(pos, hit - pos));
  texts.push_back(
      "emoji 🦙🚀😶‍🌫️ 中文 code() {\n\t return x; }    spaces     \n\n\n");
  texts.push_back("<s>[INST] <|eot_id|> <|begin_of_text|>");
  texts.push_back("<|user|>\n Hi<|end|>\n<|assistant|>\n");
  return texts;
}

void check_same_ids(const std::string& vocab) {
  GGUFFile f(kDir + vocab);
  Tokenizer from_gguf = Tokenizer::from_gguf(f);
  TempDir dir;
  write_hf_tokenizer_folder(from_gguf.vocab(), dir.path());
  Tokenizer from_hf = Tokenizer::from_hf_folder(dir.path());
  EXPECT_EQ(from_hf.vocab_size(), from_gguf.vocab_size());
  EXPECT_EQ(from_hf.bos_id(), from_gguf.bos_id());
  EXPECT_EQ(from_hf.eos_id(), from_gguf.eos_id());
  EXPECT_EQ(from_hf.add_bos(), from_gguf.add_bos());
  EXPECT_EQ(from_hf.eos_ids(), from_gguf.eos_ids());
  for (const auto& text : vector_inputs(vocab)) {
    for (bool special : {false, true}) {
      EXPECT_EQ(from_hf.encode(text, special, special), from_gguf.encode(text, special, special))
          << "input: '" << text << "' special=" << special;
    }
  }
  // Tokenizer::load accepts the folder and the tokenizer.json path (small vocab only: each
  // load of the 128k vocab costs a second under sanitizers).
  if (from_gguf.vocab_size() < 50000) {
    EXPECT_EQ(Tokenizer::load(dir.path() + "/tokenizer.json").vocab_size(), from_gguf.vocab_size());
  }
}

TEST(TokenizerHf, LlamaBpeGgufAndHfAgree) {
  check_same_ids("ggml-vocab-llama-bpe.gguf");
}
TEST(TokenizerHf, LlamaSpmGgufAndHfAgree) {
  check_same_ids("ggml-vocab-llama-spm.gguf");
}
// A sequence of six Split regexes (code point ranges, \z) and Phi-3's rstrip added tokens
// survive the round trip through tokenizer.json.
TEST(TokenizerHf, DeepSeekLlmGgufAndHfAgree) {
  check_same_ids("ggml-vocab-deepseek-llm.gguf");
}
TEST(TokenizerHf, Phi3GgufAndHfAgree) {
  check_same_ids("ggml-vocab-phi-3.gguf");
}

// Gemma 4 (metaspace BPE) round-trips through the tokenizer.json transformers writes for it
// (Replace normalizer, BPE with byte fallback): merged over the whole text there, split at
// newline runs from GGUF, the same ids.
TEST(TokenizerHf, Gemma4GgufAndHfAgree) {
  check_same_ids("ggml-vocab-gemma-4.gguf");
}

TEST(TokenizerHf, WrittenJsonIsStandard) {
  GGUFFile f(kDir + "ggml-vocab-llama-spm.gguf");
  Vocab v = vocab_from_gguf(f);
  v.chat_template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
  TempDir dir;
  write_hf_tokenizer_folder(v, dir.path());
  json j = json::parse(slurp(dir.path() + "/tokenizer.json"));
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["model"]["byte_fallback"], true);
  EXPECT_EQ(j["model"]["unk_token"], "<unk>");
  EXPECT_EQ(j["model"]["vocab"].size(), 32000u);
  EXPECT_EQ(j["model"]["vocab"]["▁world"], 3186);
  EXPECT_GT(j["model"]["merges"].size(), 30000u);
  EXPECT_EQ(j["model"]["merges"][0], "▁ t");  // highest-scoring piece first
  ASSERT_EQ(j["added_tokens"].size(), 3u);
  EXPECT_EQ(j["added_tokens"][1]["content"], "<s>");
  EXPECT_EQ(j["added_tokens"][1]["special"], true);
  EXPECT_EQ(j["decoder"]["type"], "Sequence");
  EXPECT_EQ(j["normalizer"]["normalizers"][0]["type"], "Prepend");
  EXPECT_EQ(j["post_processor"]["single"][0]["SpecialToken"]["id"], "<s>");
  json c = json::parse(slurp(dir.path() + "/tokenizer_config.json"));
  EXPECT_EQ(c["bos_token"], "<s>");
  EXPECT_EQ(c["eos_token"], "</s>");
  EXPECT_EQ(c["add_bos_token"], true);
  EXPECT_EQ(c["chat_template"], v.chat_template);
  Tokenizer t = Tokenizer::from_hf_folder(dir.path());
  EXPECT_EQ(t.chat_template(), v.chat_template);
  EXPECT_EQ(t.bos_text(), "<s>");

  GGUFFile fb(kDir + "ggml-vocab-llama-bpe.gguf");
  write_hf_tokenizer_json(vocab_from_gguf(fb), dir.path() + "/bpe.json");
  json b = json::parse(slurp(dir.path() + "/bpe.json"));
  EXPECT_EQ(b["model"]["type"], "BPE");
  EXPECT_EQ(b["model"]["byte_fallback"], false);
  EXPECT_EQ(b["model"]["ignore_merges"], true);
  EXPECT_EQ(b["model"]["merges"][0], "Ġ Ġ");
  EXPECT_EQ(b["model"]["merges"].size(), 280147u);
  EXPECT_EQ(b["pre_tokenizer"]["pretokenizers"][0]["type"], "Split");
  EXPECT_EQ(b["pre_tokenizer"]["pretokenizers"][1]["type"], "ByteLevel");
  EXPECT_EQ(b["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(b["added_tokens"].size(), 256u);
}

// A small hand-written byte-level tokenizer.json in the newer shape (merges as pairs, no
// tokenizer_config.json, BOS from the post-processor, a non-special added token).
TEST(TokenizerHf, HandWrittenByteLevelFile) {
  TempDir dir;
  json vocab = json::object();
  // Byte-level alphabet for "a", "b", "Ġ" (space) plus merges "a b" → "ab", "Ġ ab" → "Ġab".
  vocab["a"] = 0;
  vocab["b"] = 1;
  vocab["Ġ"] = 2;
  vocab["ab"] = 3;
  vocab["Ġab"] = 4;
  json j = {
      {"version", "1.0"},
      {"added_tokens", json::array({json{{"id", 5}, {"content", "<bos>"}, {"special", true}},
                                    json{{"id", 6}, {"content", "<tool>"}, {"special", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({json{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array({json::array({"a", "b"}), json::array({"Ġ", "ab"})})}}}};
  spit(dir.path() + "/tokenizer.json", j.dump());
  Tokenizer t = Tokenizer::from_hf_folder(dir.path());
  EXPECT_EQ(t.vocab_size(), 7u);
  EXPECT_EQ(t.bos_id(), 5);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.encode("ab ab", true, false), (std::vector<int32_t>{5, 3, 4}));
  EXPECT_EQ(t.encode("ab<tool>b", false, false), (std::vector<int32_t>{3, 6, 1}));
  EXPECT_EQ(t.decode(t.encode("ab ab", false, false)), "ab ab");
  EXPECT_TRUE(t.is_special(5));
  EXPECT_FALSE(t.is_special(6));
}

// Gemma 4's shape, small: spaces become "▁" by the normalizer, merges by rank over the whole
// text (a merge across the newline too), byte fallback for characters missing from the vocab,
// and its special chat markers kept visible (user-defined) for the chat parsers.
TEST(TokenizerHf, HandWrittenMetaspaceFile) {
  TempDir dir;
  const std::string sp = "\xE2\x96\x81";
  json vocab = {{"<pad>", 0}, {"<eos>", 1},   {"<bos>", 2},  {"<unk>", 3}, {"a", 4},
                {"b", 5},     {sp, 6},        {"\n", 7},     {"ab", 8},    {sp + "ab", 9},
                {"b\n", 10},  {"<0xC3>", 11}, {"<0xA9>", 12}};
  json added = json::array();
  for (auto [id, text] : {std::pair{0, "<pad>"},
                          {1, "<eos>"},
                          {2, "<bos>"},
                          {3, "<unk>"},
                          {13, "<|channel>"},
                          {14, "<|turn>"}})
    added.push_back({{"id", id}, {"content", text}, {"special", true}});
  json j = {
      {"added_tokens", added},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({json{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                      json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}})}}},
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"unk_token", "<unk>"},
        {"vocab", vocab},
        {"merges", json::array({"a b", sp + " ab", "b \n"})}}}};
  spit(dir.path() + "/tokenizer.json", j.dump());
  spit(dir.path() + "/tokenizer_config.json", R"({"bos_token": "<bos>", "add_bos_token": true})");
  Tokenizer t = Tokenizer::from_hf_folder(dir.path());
  EXPECT_EQ(t.kind(), VocabKind::MetaspaceBPE);
  EXPECT_EQ(t.encode("ab ab\n", true, false), (std::vector<int32_t>{2, 8, 9, 7}));
  EXPECT_EQ(t.encode("b\né", false, false), (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(t.decode(t.encode("ab ab b\né", false, false)), "ab ab b\né");
  EXPECT_EQ(t.token_type(13), TokenType::UserDefined);  // <|channel>
  EXPECT_EQ(t.token_type(14), TokenType::Control);      // <|turn>
  EXPECT_EQ(t.decode(t.encode("<|turn>a<|channel>", false, true), /*skip_special=*/true),
            "a<|channel>");
}

TEST(TokenizerHf, BrokenFilesAreErrors) {
  TempDir dir;
  EXPECT_THROW(Tokenizer::from_hf_folder(dir.path()), Error);  // no tokenizer.json
  spit(dir.path() + "/tokenizer.json", "{ not json");
  EXPECT_THROW(Tokenizer::from_hf_folder(dir.path()), Error);
  spit(dir.path() + "/tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  try {
    Tokenizer::from_hf_folder(dir.path());
    FAIL() << "WordPiece accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WordPiece"), std::string::npos) << e.what();
  }
  spit(dir.path() + "/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}}})");
  EXPECT_THROW(Tokenizer::from_hf_folder(dir.path()), Error);
  spit(dir.path() + "/tokenizer.json",
       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_THROW(Tokenizer::from_hf_folder(dir.path()), Error);  // neither byte-level nor SPM
}

// Fuzzing findings: a float id (5.5e66 converted to an integer was undefined behaviour) and a
// sparse id (2e9 for one token made the reader allocate two billion placeholder tokens).
TEST(TokenizerHf, HostileIdsAreErrors) {
  TempDir dir;
  const std::string head =
      R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "merges": [], )";
  for (const char* vocab : {R"("vocab": {"a": 5.5e66})", R"("vocab": {"a": 1.0})",
                            R"("vocab": {"a": -1})", R"("vocab": {"a": 0, "b": 2000000000})"}) {
    spit(dir.path() + "/tokenizer.json", head + vocab + "}}");
    try {
      Tokenizer::from_hf_folder(dir.path());
      FAIL() << "accepted " << vocab;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token id"), std::string::npos) << e.what();
    }
  }
  spit(dir.path() + "/tokenizer.json",
       head + R"("vocab": {"a": 0}}, "added_tokens": [{"id": 1e300, "content": "x"}]})");
  EXPECT_THROW(Tokenizer::from_hf_folder(dir.path()), Error);
}

}  // namespace
}  // namespace pith
