// KvStore (the runtime-wide key-value store) and the native compiler's pure parts: cache keys
// and the import table.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/kv_store.h"
#include "runtime/native_compiler.h"

namespace pith::runtime {
namespace {

TEST(KvStore, SetGetEraseContains) {
  LocalKvStore s;
  EXPECT_FALSE(s.get("k").has_value());
  EXPECT_EQ(s.set("k", "v1"), PITH_OK);
  EXPECT_EQ(s.get("k").value(), "v1");
  EXPECT_EQ(s.set("k", "v2"), PITH_OK);
  EXPECT_EQ(s.get("k").value(), "v2");
  EXPECT_TRUE(s.contains("k"));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.erase("k"));
  EXPECT_FALSE(s.erase("k"));
  EXPECT_FALSE(s.contains("k"));
  EXPECT_EQ(s.set("", ""), PITH_OK);  // empty key and value are fine
  EXPECT_EQ(s.get("").value(), "");
}

TEST(KvStore, LimitsRejectWithoutChangingAnything) {
  KvStoreLimits limits;
  limits.max_key = 4;
  limits.max_value = 8;
  limits.max_total = 20;
  LocalKvStore s(limits);
  EXPECT_EQ(s.set("toolong", "v"), PITH_ERR_LIMIT);
  EXPECT_EQ(s.set("k", "123456789"), PITH_ERR_LIMIT);
  EXPECT_EQ(s.set("a", "12345678"), PITH_OK);    // 9 bytes
  EXPECT_EQ(s.set("b", "12345678"), PITH_OK);    // 18 bytes
  EXPECT_EQ(s.set("c", "123"), PITH_ERR_LIMIT);  // would be 22
  EXPECT_FALSE(s.contains("c"));
  EXPECT_EQ(s.set("a", "1"), PITH_OK);  // replacing frees space: 11 bytes
  EXPECT_EQ(s.set("c", "123"), PITH_OK);
  EXPECT_EQ(s.size(), 3u);
}

TEST(NativeCompiler, Sha256MatchesKnownVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(NativeCompiler, CacheKeyDependsOnModuleAndToolchain) {
  NativeCompilerConfig a;
  a.cache_dir = testing::TempDir() + "/pith-key-a";
  NativeCompilerConfig b = a;
  b.opt_level = "-O1";
  NativeCompiler ca(a), cb(b);
  EXPECT_EQ(ca.cache_key("module"), ca.cache_key("module"));
  EXPECT_NE(ca.cache_key("module"), ca.cache_key("module2"));
  EXPECT_NE(ca.cache_key("module"), cb.cache_key("module"));  // flags are part of the key
  EXPECT_EQ(ca.cached("never compiled"), "");
}

TEST(NativeCompiler, BuildFoldersOfAKilledProcessAreSweptAtStart) {
  namespace fs = std::filesystem;
  NativeCompilerConfig c;
  c.cache_dir = testing::TempDir() + "/pith-sweep";
  fs::remove_all(c.cache_dir);
  const fs::path old_build = fs::path(c.cache_dir) / "build-0123456789abcdef-AbCdEf";
  const fs::path live_build = fs::path(c.cache_dir) / "build-fedcba9876543210-XyZxYz";
  fs::create_directories(old_build);
  fs::create_directories(live_build);
  std::ofstream(old_build / "guest.c") << "int half_written";
  fs::last_write_time(old_build, fs::file_time_type::clock::now() - std::chrono::hours(2));
  NativeCompiler compiler(c);
  EXPECT_FALSE(fs::exists(old_build));
  EXPECT_TRUE(fs::exists(live_build));  // another process may be building there right now
  fs::remove_all(c.cache_dir);
}

TEST(NativeCompiler, ImportTableKnowsTheAbi) {
  EXPECT_TRUE(is_host_import("pith", "future_wait_any"));
  EXPECT_TRUE(is_host_import("pith", "forward_tokens"));
  EXPECT_TRUE(is_host_import("wasi_snapshot_preview1", "fd_write"));
  EXPECT_FALSE(is_host_import("pith", "fd_write"));
  EXPECT_FALSE(is_host_import("env", "memory"));
  std::string protos = host_import_prototypes();
  EXPECT_NE(protos.find("u32 Z_pithZ_yield(struct Z_pith_instance_t*);"), std::string::npos);
  EXPECT_NE(protos.find("void Z_wasi_snapshot_preview1Z_proc_exit("
                        "struct Z_wasi_snapshot_preview1_instance_t*, u32);"),
            std::string::npos);
}

}  // namespace
}  // namespace pith::runtime
