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

bool is_c_source(const std::string& path) {
  return fs::path(path).extension() == ".c";
}
}  // namespace

std::vector<std::vector<std::string>> inferlet_build_commands(const InferletBuildOptions& o,
                                                              const std::string& workdir) {
  const std::string cc = o.compiler.empty() ? find_compiler() : o.compiler;
  std::vector<std::vector<std::string>> cmds;
  std::vector<std::string> objects;
  for (const auto& s : o.sources) {
    if (!is_c_source(s)) continue;
    std::string obj = (fs::path(workdir) /
                       (std::to_string(objects.size()) + "-" + fs::path(s).stem().string() + ".o"))
                          .string();
    std::vector<std::string> cmd = {
        cc, "-x", "c", "--target=wasm32-wasi", "--sysroot=/usr", "-O2", "-std=c11", "-w"};
    for (const auto& d : o.include_dirs) cmd.push_back("-I" + fs::absolute(d).string());
    cmd.insert(cmd.end(), o.c_flags.begin(), o.c_flags.end());
    cmd.insert(cmd.end(), {"-c", fs::absolute(s).string(), "-o", obj});
    cmds.push_back(std::move(cmd));
    objects.push_back(obj);
  }
  std::vector<std::string> link = {cc,
                                   "--target=wasm32-wasi",
                                   "--sysroot=/usr",
                                   "-O2",
                                   "-std=c++20",
                                   "-fno-exceptions",
                                   "-Wl,--stack-first",
                                   "-Wl,-z,stack-size=131072",
                                   "-Wl,--strip-debug",
                                   "-I" PITH_SDK_INCLUDE_DIR};
  for (const auto& d : o.include_dirs)
    link.insert(link.end(), {"-isystem", fs::absolute(d).string()});
  for (const auto& f : o.extra_flags) link.push_back(f);
  for (const auto& s : o.sources)
    if (!is_c_source(s)) link.push_back(fs::absolute(s).string());
  link.insert(link.end(), objects.begin(), objects.end());
  link.push_back("-o");
  link.push_back(fs::absolute(o.output).string());
  cmds.push_back(std::move(link));
  return cmds;
}

void build_inferlet(const InferletBuildOptions& o) {
  if (o.sources.empty()) fail("inferlet build: no source files");
  for (const auto& s : o.sources)
    if (!fs::exists(s)) fail("{}: no such file", s);
  for (const auto& d : o.include_dirs)
    if (!fs::is_directory(d)) fail("{}: no such directory", d);
  if (o.output.empty()) fail("inferlet build: no output file (-o)");
  ProcessLimits limits;
  limits.cpu_seconds = 300;
  limits.wall_seconds = 600;  // a large C source (an embedded interpreter) on a busy machine
  std::string dir = (fs::temp_directory_path() / "pith-inferlet-build-XXXXXX").string();
  if (!mkdtemp(dir.data())) fail("inferlet build: cannot create a temporary directory");
  for (const auto& cmd : inferlet_build_commands(o, dir)) {
    ProcessResult r = run_limited(cmd, dir, limits);
    if (!r.ok()) {
      std::error_code ec;
      fs::remove_all(dir, ec);
      fail("inferlet build failed ({}):\n{}", r.describe(), r.output);
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace pith::runtime
