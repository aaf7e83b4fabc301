// clang++-14 --target=wasm32-wasi for inferlets. See inferlet_builder.h.
#include "runtime/inferlet_builder.h"

#include <unistd.h>

#include <filesystem>

#include "common/error.h"
#include "runtime/subprocess.h"

namespace pith::runtime {

namespace fs = std::filesystem;

namespace {
std::string find_compiler() {
  for (const char* c : {"/usr/bin/clang++-14", "/usr/lib/llvm-14/bin/clang++"})
    if (access(c, X_OK) == 0) return c;
  return "clang++";
}
}  // namespace

std::vector<std::string> inferlet_build_command(const InferletBuildOptions& o) {
  std::vector<std::string> cmd = {o.compiler.empty() ? find_compiler() : o.compiler,
                                  "--target=wasm32-wasi", "--sysroot=/usr", "-O2", "-std=c++20",
                                  "-fno-exceptions", "-Wl,--stack-first",
                                  "-Wl,-z,stack-size=131072", "-Wl,--strip-debug",
                                  "-I" PITH_SDK_INCLUDE_DIR};
  for (const auto& f : o.extra_flags) cmd.push_back(f);
  for (const auto& s : o.sources) cmd.push_back(fs::absolute(s).string());
  cmd.push_back("-o");
  cmd.push_back(fs::absolute(o.output).string());
  return cmd;
}

void build_inferlet(const InferletBuildOptions& o) {
  if (o.sources.empty()) fail("inferlet build: no source files");
  for (const auto& s : o.sources)
    if (!fs::exists(s)) fail("{}: no such file", s);
  if (o.output.empty()) fail("inferlet build: no output file (-o)");
  ProcessLimits limits;
  limits.cpu_seconds = 300;
  std::string dir = (fs::temp_directory_path() / "pith-inferlet-build-XXXXXX").string();
  if (!mkdtemp(dir.data())) fail("inferlet build: cannot create a temporary directory");
  ProcessResult r = run_limited(inferlet_build_command(o), dir, limits);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!r.ok()) fail("inferlet build failed ({}):\n{}", r.describe(), r.output);
}

}  // namespace pith::runtime
