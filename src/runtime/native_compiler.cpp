// wasm2c + cc into cached shared objects. See native_compiler.h.
#include "runtime/native_compiler.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/read_file.h"
#include "runtime/api/host_imports.h"

namespace pith::runtime {

namespace fs = std::filesystem;

namespace {

// Bump when the shim or the calling convention between host and shared object changes.
constexpr const char* kShimVersion = "pith-native-shim-1";

void write_file(const fs::path& p, std::string_view data) {
  std::ofstream out(p, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) fail("{}: cannot write", p.string());
}

std::string first_line_of(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[256];
    if (fgets(buf, sizeof buf, f)) out = buf;
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string params_text(const char* params) {  // "(u32, u64)" -> ", u32, u64"; "()" -> ""
  std::string p(params);
  p = p.substr(1, p.size() - 2);
  return p.empty() ? "" : ", " + p;
}

// The cc command line (without inputs/outputs). Stack-clash protection makes every large guest
// frame probe its pages, so a deep recursion always hits the fiber stack's guard.
std::vector<std::string> cc_flags(const NativeCompilerConfig& c) {
  return {c.opt_level,
          "-fPIC",
          "-shared",
          "-fstack-clash-protection",
          "-fno-strict-aliasing",
          "-DNDEBUG",
          "-DWASM_RT_MEMCHECK_SIGNAL_HANDLER=1",
          "-DWASM_RT_USE_STACK_DEPTH_COUNT=0",
          "-w"};
}

struct ImportLine {
  std::string module, name;
};

// wasm2c marks each import declaration with a comment: /* import: 'module' 'name' */
std::vector<ImportLine> parse_imports(const std::string& header) {
  static constexpr std::string_view kTag = "/* import: '";
  std::vector<ImportLine> out;
  for (size_t pos = header.find(kTag); pos != std::string::npos; pos = header.find(kTag, pos)) {
    pos += kTag.size();
    size_t end_mod = header.find('\'', pos);
    size_t start_name = header.find('\'', end_mod + 1);
    size_t end_name = header.find('\'', start_name + 1);
    if (end_mod == std::string::npos || start_name == std::string::npos ||
        end_name == std::string::npos)
      fail("unexpected wasm2c output: malformed import comment");
    out.push_back({header.substr(pos, end_mod - pos),
                   header.substr(start_name + 1, end_name - start_name - 1)});
    pos = end_name;
  }
  return out;
}

// Builds the shim: stable entry points independent of the module's import set. The generated
// instantiate function takes one instance pointer per imported module, in order.
std::string make_shim(const std::string& header) {
  static constexpr std::string_view kDecl = "void Z_guest_instantiate(Z_guest_instance_t*";
  size_t pos = header.find(kDecl);
  if (pos == std::string::npos)
    fail("wasm2c output has no instantiate function (unexpected wasm2c version?)");
  size_t end = header.find(");", pos);
  std::string params = header.substr(pos + kDecl.size(), end - pos - kDecl.size());
  std::string args;
  static constexpr std::string_view kStruct = "struct ";
  for (size_t p = params.find(kStruct); p != std::string::npos; p = params.find(kStruct, p)) {
    p += kStruct.size();
    size_t star = params.find('*', p);
    if (star == std::string::npos) fail("unexpected wasm2c output: instantiate parameters");
    args += fmt::format(", (struct {}*)host", params.substr(p, star - p));
    p = star;
  }
  if (header.find("void Z_guestZ__start(Z_guest_instance_t*);") == std::string::npos)
    fail(
        "module exports no _start function: build the inferlet as a WASI command "
        "(a main function)");
  std::string shim = "#include <stddef.h>\n#include \"guest.h\"\n";
  shim += host_import_prototypes();
  shim += "size_t pith_guest_instance_size(void) { return sizeof(Z_guest_instance_t); }\n";
  shim += "void pith_guest_init_module(void) { Z_guest_init_module(); }\n";
  shim +=
      "void pith_guest_instantiate(void* inst, void* host) { (void)host; "
      "Z_guest_instantiate((Z_guest_instance_t*)inst" +
      args + "); }\n";
  shim += "void pith_guest_free(void* inst) { Z_guest_free((Z_guest_instance_t*)inst); }\n";
  shim += "void pith_guest_start(void* inst) { Z_guestZ__start((Z_guest_instance_t*)inst); }\n";
  return shim;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  PITH_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) == 1);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string host_import_prototypes() {
  std::string out;
#define PITH_PROTO_HOST(name, ret, params)                                         \
  out += fmt::format("{} Z_pithZ_{}(struct Z_pith_instance_t*{});\n", #ret, #name, \
                     params_text(#params));
#define PITH_PROTO_WASI(name, ret, params)          \
  out += fmt::format(                               \
      "{} Z_wasi_snapshot_preview1Z_{}(struct "     \
      "Z_wasi_snapshot_preview1_instance_t*{});\n", \
      #ret, #name, params_text(#params));
  PITH_HOST_IMPORTS(PITH_PROTO_HOST)
  PITH_WASI_IMPORTS(PITH_PROTO_WASI)
#undef PITH_PROTO_HOST
#undef PITH_PROTO_WASI
  return out;
}

bool is_host_import(std::string_view module, std::string_view name) {
  static const std::set<std::string, std::less<>> host = {
#define PITH_NAME(name, ret, params) #name,
      PITH_HOST_IMPORTS(PITH_NAME)};
  static const std::set<std::string, std::less<>> wasi = {PITH_WASI_IMPORTS(PITH_NAME)};
#undef PITH_NAME
  if (module == "pith") return host.count(name) > 0;
  if (module == "wasi_snapshot_preview1") return wasi.count(name) > 0;
  return false;
}

NativeCompiler::NativeCompiler(NativeCompilerConfig config) : config_(std::move(config)) {
  if (config_.cache_dir.empty()) fail("native compiler: no cache directory configured");
  std::error_code ec;
  fs::create_directories(config_.cache_dir, ec);
  if (ec) fail("{}: cannot create cache directory: {}", config_.cache_dir, ec.message());
  sweep_abandoned_builds();
  std::string wasm2c_version = first_line_of(config_.wasm2c + " --version");
  std::string cc_version = first_line_of(config_.cc + " --version");
  toolchain_id_ = kShimVersion;
  toolchain_id_ += "\n" + wasm2c_version + "\n" + cc_version + "\n";
  for (const auto& f : cc_flags(config_)) toolchain_id_ += f + " ";
  toolchain_id_ += "\n" + host_import_prototypes();
}

void NativeCompiler::sweep_abandoned_builds() const {
  // A build folder lives at most as long as its two tool runs; one much older than that belongs
  // to a process killed mid-build (the cache may be shared, so younger ones are left alone).
  const auto max_age = std::chrono::duration_cast<fs::file_time_type::duration>(
      std::chrono::duration<double>(4 * config_.limits.wall_seconds + 60));
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(config_.cache_dir, ec)) {
    if (!f.is_directory(ec) || f.path().filename().string().rfind("build-", 0) != 0) continue;
    auto t = fs::last_write_time(f.path(), ec);
    if (!ec && now - t > max_age) fs::remove_all(f.path(), ec);
  }
}

std::string NativeCompiler::cache_key(std::string_view wasm) const {
  return sha256_hex(sha256_hex(wasm) + "\n" + toolchain_id_);
}

std::string NativeCompiler::cached(std::string_view wasm) const {
  fs::path so = fs::path(config_.cache_dir) / (cache_key(wasm) + ".so");
  std::error_code ec;
  return fs::exists(so, ec) ? so.string() : std::string();
}

std::string NativeCompiler::compile(std::string_view wasm) const {
  return compile(wasm, cache_key(wasm));
}

std::string NativeCompiler::compile(std::string_view wasm, const std::string& key) const {
  fs::path so = fs::path(config_.cache_dir) / (key + ".so");
  std::error_code ec;
  if (fs::exists(so, ec)) return so.string();

  std::string tmpl =
      (fs::path(config_.cache_dir) / ("build-" + key.substr(0, 16) + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) fail("{}: cannot create a build directory", tmpl);
  fs::path work(tmpl);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{work};

  write_file(work / "module.wasm", wasm);
  ProcessResult r = run_limited({config_.wasm2c, "-n", "guest", "module.wasm", "-o", "guest.c"},
                                work.string(), config_.limits);
  if (!r.ok()) fail("wasm2c rejected the module ({}): {}", r.describe(), r.output);

  std::string header = read_file((work / "guest.h").string());
  for (const auto& imp : parse_imports(header)) {
    if (!is_host_import(imp.module, imp.name))
      fail("module imports {}.{}, which pith does not provide", imp.module, imp.name);
  }
  write_file(work / "shim.c", make_shim(header));

  std::vector<std::string> cmd = {config_.cc};
  for (const auto& f : cc_flags(config_)) cmd.push_back(f);
  for (const char* f : {"-I.", "guest.c", "shim.c", "-o", "module.so"}) cmd.push_back(f);
  r = run_limited(cmd, work.string(), config_.limits);
  if (!r.ok()) fail("native compile failed ({}): {}", r.describe(), r.output);

  // Atomic publish: concurrent compiles of the same module both succeed, one file wins.
  fs::rename(work / "module.so", so, ec);
  if (ec) fail("{}: cannot store compiled module: {}", so.string(), ec.message());
  return so.string();
}

}  // namespace pith::runtime
