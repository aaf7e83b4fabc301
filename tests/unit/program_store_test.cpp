// The program store under faults: uploads are atomic (a writer killed mid-write leaves only a
// temporary, swept at the next start, never a partial program that would be served), a storage
// failure is a clear error that leaves the store as it was, and a stored program survives a
// restart intact. The file helper underneath (common/atomic_file.h) is tested with a file-size
// limit standing in for a full disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "runtime/runtime.h"
#include "server/program_store.h"

namespace pith {
namespace {

namespace fs = std::filesystem;
const std::string kEcho = std::string(PITH_INFERLET_DIR) + "/echo.wasm";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("pith-store-test-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(AtomicFile, AFailedWriteLeavesTheTargetAndNoTemporary) {
  TempDir dir;
  const std::string target = (dir.path / "f.bin").string();
  write_file_atomically(target, "first version");
  EXPECT_EQ(slurp(target), "first version");
  // A file-size limit makes write() fail like a full disk does (EFBIG instead of ENOSPC).
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    write_file_atomically(target, std::string(4000, 'x'));
  } catch (const Error& e) {
    error = e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_NE(error.find(target), std::string::npos) << error;
  EXPECT_NE(error.find("cannot write (File too large)"), std::string::npos) << error;
  EXPECT_EQ(slurp(target), "first version");
  EXPECT_EQ(remove_temporaries(dir.path.string()), 0u);
}

TEST(ProgramStore, AnUploadKilledMidWriteIsNeverServedAndIsSweptAtRestart) {
  if (!fs::exists(kEcho)) GTEST_SKIP() << "inferlets not built";
  TempDir dir;
  const std::string wasm = slurp(kEcho);
  runtime::RuntimeConfig rc;
  rc.tiers = runtime::TierPolicy::InterpreterOnly;
  runtime::Runtime rt(rc);
  std::string hash;
  {
    server::ProgramStore store(dir.path.string(), rt);
    hash = store.upload(wasm, "echo").first.hash;
  }
  // What a writer killed between write and rename leaves behind: a truncated temporary.
  const std::string other(64, 'a');
  std::ofstream(dir.path / (other + ".wasm.4242.0.tmp")) << wasm.substr(0, wasm.size() / 2);
  server::ProgramStore restarted(dir.path.string(), rt);
  auto listed = restarted.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].hash, hash);
  EXPECT_EQ(listed[0].name, "echo");
  EXPECT_FALSE(restarted.find(other));
  EXPECT_EQ(restarted.get(hash)->hash(), hash);  // the stored one loads, intact
  for (const auto& f : fs::directory_iterator(dir.path))
    EXPECT_NE(f.path().extension(), ".tmp") << f.path();
}

TEST(ProgramStore, AStorageFailureIsItsOwnErrorAndStoresNothing) {
  if (!fs::exists(kEcho)) GTEST_SKIP() << "inferlets not built";
  TempDir dir;
  runtime::RuntimeConfig rc;
  rc.tiers = runtime::TierPolicy::InterpreterOnly;
  runtime::Runtime rt(rc);
  server::ProgramStore store(dir.path.string(), rt);
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 100;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  bool storage_error = false;
  try {
    store.upload(slurp(kEcho), "echo");
  } catch (const server::ProgramStorageError&) {
    storage_error = true;
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_TRUE(storage_error);
  EXPECT_TRUE(store.list().empty());
  EXPECT_TRUE(fs::is_empty(dir.path));
}

}  // namespace
}  // namespace pith
