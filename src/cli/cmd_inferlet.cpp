// pith run-local PROGRAM.wasm [ARGS...]: runs an inferlet in-process without a server or a model
// (model calls return PITH_ERR_NO_MODEL). Its send() messages go to stdout, one per line; its
// logs (pith_log, stdout/stderr) to stderr; each stdin line becomes a client message, EOF closes
// the input. Exit code: the inferlet's own, or 1 with the reason if it trapped or was killed.
// A module not yet in the native cache starts on the interpreter tier at once; its native build
// runs in the background and is finished (and cached for the next run) before the command exits.
//
// pith inferlet build (DIR | FILE.cpp... [FILE.c...]) [-o FILE.wasm]: compiles an inferlet with
// clang++-14 and the SDK. A directory means its *.cpp files plus what its optional
// `inferlet.build` file names (the same file feeds the CMake build, inferlets/CMakeLists.txt):
//   c_source PATH      a C source compiled as C and linked in (e.g. an embedded interpreter)
//   include_dir PATH   an include directory (-isystem for C++, -I for C)
//   c_prelude PATH     a header force-included into every C source (-include)
// one per line, '#' comments, relative paths relative to the directory. The output defaults to
// NAME.wasm in the current directory for a directory NAME.
// pith inferlet new NAME [-o DIR]: scaffolds DIR/NAME/{NAME.cpp,README.md} (inferlet_scaffold.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/attached_instance.h"
#include "cli/commands.h"
#include "cli/inferlet_scaffold.h"
#include "common/error.h"
#include "runtime/inferlet_builder.h"
#include "runtime/runtime.h"

namespace pith::cli {

namespace {

struct RunLocalArgs {
  std::string program;
  std::vector<std::string> args;
  double cpu_limit_s = 5;
  uint32_t memory_mib = 64;
  std::string cache_dir;
  std::vector<std::string> http_allow;
  bool no_stdin = false;
  bool verbose = false;
};

namespace fs = std::filesystem;

// Adds what DIR/inferlet.build names to `b` (see the top of this file).
void read_build_file(const fs::path& dir, runtime::InferletBuildOptions& b) {
  const fs::path file = dir / "inferlet.build";
  std::ifstream in(file);
  if (!in) return;
  auto resolve = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? p : (dir / p).string();
  };
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    const size_t k0 = line.find_first_not_of(" \t");
    if (k0 == std::string::npos) continue;
    const size_t k1 = line.find_first_of(" \t", k0);
    const size_t v0 =
        k1 == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", k1);
    if (v0 == std::string::npos) fail("{}:{}: expected KEY VALUE", file.string(), n);
    const std::string key = line.substr(k0, k1 - k0);
    std::string value = line.substr(v0);
    value.erase(value.find_last_not_of(" \t\r") + 1);
    if (key == "c_source") {
      b.sources.push_back(resolve(value));
    } else if (key == "include_dir") {
      b.include_dirs.push_back(resolve(value));
    } else if (key == "c_prelude") {
      b.c_flags.insert(b.c_flags.end(), {"-include", fs::absolute(resolve(value)).string()});
    } else {
      fail("{}:{}: unknown key '{}' (c_source, include_dir, c_prelude)", file.string(), n, key);
    }
  }
}

// Replaces each directory among the sources by its *.cpp files and its inferlet.build inputs.
void expand_directories(runtime::InferletBuildOptions& b) {
  std::vector<std::string> given = std::move(b.sources);
  b.sources.clear();
  for (const std::string& s : given) {
    if (!fs::is_directory(s)) {
      b.sources.push_back(s);
      continue;
    }
    std::vector<std::string> cpp;
    for (const auto& e : fs::directory_iterator(s))
      if (e.is_regular_file() && e.path().extension() == ".cpp") cpp.push_back(e.path().string());
    if (cpp.empty()) fail("inferlet build: {} holds no .cpp file", s);
    std::sort(cpp.begin(), cpp.end());
    b.sources.insert(b.sources.end(), cpp.begin(), cpp.end());
    read_build_file(s, b);
    if (b.output.empty() && given.size() == 1) {
      fs::path name = fs::absolute(s).lexically_normal();
      if (name.filename().empty()) name = name.parent_path();  // "DIR/"
      b.output = name.filename().string() + ".wasm";
    }
  }
}

int run_local(const RunLocalArgs& a) {
  runtime::RuntimeConfig config;
  config.compiler.cache_dir = a.cache_dir;
  if (a.cpu_limit_s < 0) fail("--cpu-limit must be >= 0 (0 = unlimited)");
  if (a.memory_mib == 0 || a.memory_mib > 4096) fail("--memory-mib must be in 1..4096");
  config.limits.cpu_ns = static_cast<uint64_t>(a.cpu_limit_s * 1e9);
  config.limits.memory_pages = a.memory_mib * 16;
  config.http_allow = a.http_allow;
  runtime::Runtime rt(config);
  auto program = rt.load_program_file(a.program);

  std::vector<std::string> argv = {a.program};
  argv.insert(argv.end(), a.args.begin(), a.args.end());
  return attach(rt.launch(program, argv, terminal_sink()), a.program, a.no_stdin, a.verbose);
}

}  // namespace

void add_inferlet_commands(CLI::App& app) {
  auto a = std::make_shared<RunLocalArgs>();
  auto* run = app.add_subcommand("run-local", "Run an inferlet in-process, without a model");
  run->add_option("program", a->program, "inferlet .wasm file")->required();
  run->add_option("args", a->args, "arguments passed to the inferlet (after --)");
  run->add_option("--cpu-limit", a->cpu_limit_s, "CPU time limit in seconds (0 = none)");
  run->add_option("--memory-mib", a->memory_mib, "linear-memory cap in MiB");
  run->add_option("--cache-dir", a->cache_dir, "native code cache (default ~/.cache/pith/native)");
  run->add_option("--inferlet-http-allow", a->http_allow,
                  "hosts the inferlet may reach over HTTP: HOST or HOST:PORT, comma-separated "
                  "(default: none)")
      ->delimiter(',')
      ->allow_extra_args(false);
  run->add_flag("--no-stdin", a->no_stdin, "do not forward stdin lines as messages");
  run->add_flag("-v,--verbose", a->verbose, "report the execution tier and the exit reason");
  run->callback([a] {
    int code = run_local(*a);
    std::fflush(stdout);
    if (code != 0) std::exit(code);
  });

  auto b = std::make_shared<runtime::InferletBuildOptions>();
  auto* inferlet = app.add_subcommand("inferlet", "Inferlet tools");
  inferlet->require_subcommand(1);
  auto* build =
      inferlet->add_subcommand("build", "Compile an inferlet directory or C++ sources to a .wasm");
  build
      ->add_option(
          "sources", b->sources,
          "an inferlet directory (its *.cpp and inferlet.build), or C++ (and .c) source files")
      ->required();
  build->add_option("-o,--output", b->output,
                    "output .wasm file (default for a directory NAME: NAME.wasm)");
  build->add_option("-I,--include-dir", b->include_dirs, "include directory (repeatable)");
  build->add_option("--c-flag", b->c_flags, "flag for the .c sources only (repeatable)")
      ->allow_extra_args(false);
  build->add_option("--compiler", b->compiler, "clang++ for wasm32-wasi (default clang++-14)");
  build->add_option("--flag", b->extra_flags, "extra compiler flag (repeatable)");
  build->callback([b] {
    expand_directories(*b);
    if (b->output.empty())
      fail("inferlet build: -o FILE.wasm is required unless building one directory");
    runtime::build_inferlet(*b);
    fmt::print("built {}\n", b->output);
  });

  auto n = std::make_shared<std::pair<std::string, std::string>>();  // name, directory
  auto* scaffold = inferlet->add_subcommand(
      "new", "Create a new inferlet project: NAME/NAME.cpp and NAME/README.md");
  scaffold->add_option("name", n->first, "inferlet name (letters, digits, '_', '-')")->required();
  scaffold->add_option("-o,--output-dir", n->second, "where to create NAME/ (default: .)");
  scaffold->callback([n] {
    for (const std::string& f : scaffold_inferlet(n->first, n->second))
      fmt::print("created {}\n", f);
    std::string dir = (n->second.empty() ? std::string(".") : n->second) + "/" + n->first;
    fmt::print(
        "build: pith inferlet build {0}/{1}.cpp -o {0}/{1}.wasm\n"
        "run:   pith run -m MODEL.gguf {0}/{1}.wasm -- --prompt \"Hello\"\n",
        dir, n->first);
  });
}

}  // namespace pith::cli
