// common/read_file.h: every byte back (NULs and invalid UTF-8 included), a clear error naming
// the path otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "common/read_file.h"

namespace pith {
namespace {

TEST(ReadFile, ReturnsEveryByte) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("pith-read-file-" + std::to_string(getpid())))
          .string();
  const std::string bytes("a\0b\xff\n", 5);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  EXPECT_EQ(read_file(path), bytes);
  std::filesystem::remove(path);
}

TEST(ReadFile, MissingFileNamesThePath) {
  try {
    read_file("/nonexistent/pith/file.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/pith/file.txt: cannot open"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pith
