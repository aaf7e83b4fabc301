#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "common/error.h"

namespace pith {

namespace {
const std::string kTiny = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_temp(const std::vector<char>& bytes, const std::string& name) {
  auto path = std::filesystem::temp_directory_path() / ("pith_gguf_test_" + name);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}
}  // namespace

TEST(GGUF, ReadsLlamaMetadataAndTensors) {
  GGUFFile f(kTiny);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_NEAR(f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 1000u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")[1], "<s>");
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 1000u);

  const auto* q = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::F32);
  EXPECT_EQ(q->dims, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(q->n_bytes, 64u * 64u * 4u);
  const auto* freqs = f.find_tensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  const float* fr = reinterpret_cast<const float*>(freqs->data);
  EXPECT_FLOAT_EQ(fr[5], 32.0f);  // documented in the oracle README
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GGUF, TypeMismatchIsAClearError) {
  GGUFFile f(kTiny);
  try {
    f.get_string("llama.block_count");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama.block_count"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.get_uint("no.such.key"), Error);
  EXPECT_EQ(f.get_uint_or("no.such.key", 7), 7u);
}

TEST(GGUF, MissingFileNamesThePath) {
  try {
    GGUFFile f("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(GGUF, BadMagicAndVersionAreRejected) {
  auto bytes = read_all(kTiny);
  auto b1 = bytes;
  b1[0] = 'X';
  EXPECT_THROW(GGUFFile(write_temp(b1, "magic")), Error);
  auto b2 = bytes;
  b2[4] = 99;
  EXPECT_THROW(GGUFFile(write_temp(b2, "version")), Error);
}

TEST(GGUF, EveryTruncationIsRejectedWithoutCrashing) {
  auto bytes = read_all(kTiny);
  // Cut at many points through the header and the tensor data: each must throw pith::Error.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 4096 && n < bytes.size(); n += 7) cuts.push_back(n);
  for (size_t n = 4096; n < bytes.size(); n += bytes.size() / 50) cuts.push_back(n);
  cuts.push_back(bytes.size() - 1);
  for (size_t n : cuts) {
    std::vector<char> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto path = write_temp(cut, "trunc");
    EXPECT_THROW(GGUFFile{path}, Error) << "cut at " << n;
  }
}

TEST(GGUF, RandomCorruptionNeverCrashes) {
  // Flip random bytes in the header region: the reader either parses (a value changed) or
  // throws pith::Error; it must never read out of bounds (ASan build checks that).
  auto bytes = read_all(kTiny);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    auto b = bytes;
    for (int k = 0; k < 4; ++k) b[rng() % 40000] = static_cast<char>(rng());
    try {
      GGUFFile f(write_temp(b, "corrupt"));
      for (const auto& t : f.tensors()) ASSERT_LE(t.data + t.n_bytes, t.data + f.file_size());
    } catch (const Error&) {
    }
  }
}

}  // namespace pith
