#include "server/program_store.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/read_file.h"
#include "runtime/native_compiler.h"
#include "runtime/program.h"
#include "runtime/runtime.h"

namespace pith::server {

namespace fs = std::filesystem;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_hash(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

ProgramStore::ProgramStore(std::string dir, runtime::Runtime& runtime)
    : dir_(std::move(dir)), runtime_(runtime) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) fail("program store {}: {}", dir_, ec.message());
  // An upload killed mid-write leaves only a temporary, never a partial program.
  if (size_t n = remove_temporaries(dir_))
    spdlog::info("program store {}: removed {} unfinished upload(s)", dir_, n);
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    std::string stem = f.path().stem().string();
    if (f.path().extension() != ".wasm" || !is_hash(stem)) continue;
    Entry e;
    e.info.hash = stem;
    e.info.size = static_cast<size_t>(f.file_size(ec));
    auto t = fs::last_write_time(f.path(), ec);
    // file_clock -> system_clock through "now" on both (libstdc++ 12 lacks clock_cast).
    auto sys = std::chrono::system_clock::now() +
               std::chrono::duration_cast<std::chrono::system_clock::duration>(
                   t - fs::file_time_type::clock::now());
    e.info.uploaded_at =
        std::chrono::duration_cast<std::chrono::seconds>(sys.time_since_epoch()).count();
    std::ifstream name_file(fs::path(dir_) / (stem + ".name"));
    std::getline(name_file, e.info.name);
    entries_.emplace(stem, std::move(e));
  }
}

ProgramInfo ProgramStore::describe(const Entry& e) const {
  ProgramInfo i = e.info;
  i.loaded = e.program != nullptr;
  if (e.program) {
    i.native_ready = e.program->native_ready();
    i.native_building = e.program->native_building();
    i.compile_seconds = e.program->compile_seconds();
  }
  return i;
}

std::pair<ProgramInfo, bool> ProgramStore::upload(std::string wasm, const std::string& name) {
  return add(std::move(wasm), name, /*share=*/true);
}

std::pair<ProgramInfo, bool> ProgramStore::add(std::string wasm, const std::string& name,
                                               bool share) {
  const std::string hash = runtime::sha256_hex(wasm);
  auto remember_name = [&](Entry& e) {
    if (name.empty() || e.info.builtin || e.info.name == name) return;
    e.info.name = name;
    std::ofstream(fs::path(dir_) / (hash + ".name")) << name;
  };
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(hash);
    if (it != entries_.end() && it->second.program) {
      remember_name(it->second);
      return {describe(it->second), true};
    }
  }
  // Validates (throws) and starts the native build; then persist atomically.
  const size_t size = wasm.size();
  auto program = runtime_.load_program(wasm);
  const fs::path final_path = fs::path(dir_) / (hash + ".wasm");
  if (!fs::exists(final_path)) {
    try {
      write_file_atomically(final_path.string(), wasm);
    } catch (const Error& e) {
      throw ProgramStorageError(e.what());
    }
  }
  if (runtime::SharedState* shared = runtime_.shared_state(); shared && share) {
    // Other replicas launch it from there; without it, only from here.
    try {
      shared->put_program(hash, wasm, name);
    } catch (const runtime::StoreFailure& e) {
      spdlog::warn("program {}: not shared with the other replicas: {}", hash, e.what());
    }
  }
  std::lock_guard lock(mu_);
  auto [it, fresh] = entries_.try_emplace(hash);
  it->second.info.hash = hash;
  it->second.info.size = size;
  if (fresh) it->second.info.uploaded_at = unix_now();
  it->second.program = std::move(program);
  remember_name(it->second);
  return {describe(it->second), !fresh};
}

ProgramInfo ProgramStore::add_builtin(const std::string& name, std::string wasm) {
  auto program = runtime_.load_program(std::move(wasm));
  std::lock_guard lock(mu_);
  Entry& e = entries_[program->hash()];
  e.info.hash = program->hash();
  e.info.name = name;
  e.info.size = program->size();
  e.info.uploaded_at = unix_now();
  e.info.builtin = true;
  e.program = std::move(program);
  return describe(e);
}

std::optional<ProgramInfo> ProgramStore::find(const std::string& hash) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) return std::nullopt;
  return describe(it->second);
}

std::optional<std::string> ProgramStore::builtin_hash(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& [h, e] : entries_)
    if (e.info.builtin && e.info.name == name) return h;
  return std::nullopt;
}

std::vector<ProgramInfo> ProgramStore::list() const {
  std::lock_guard lock(mu_);
  std::vector<ProgramInfo> out;
  for (const auto& [h, e] : entries_) out.push_back(describe(e));
  return out;
}

bool ProgramStore::remove(const std::string& hash) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) return false;
  if (it->second.info.builtin)
    fail("program {} is built into the server and cannot be deleted", hash);
  entries_.erase(it);
  std::error_code ec;
  fs::remove(fs::path(dir_) / (hash + ".wasm"), ec);
  fs::remove(fs::path(dir_) / (hash + ".name"), ec);
  if (runtime::SharedState* shared = runtime_.shared_state()) {
    try {
      shared->forget_program(hash);
    } catch (const runtime::StoreFailure& e) {
      spdlog::warn("program {}: still in the shared state store: {}", hash, e.what());
    }
  }
  return true;
}

std::shared_ptr<runtime::Program> ProgramStore::fetch_elsewhere(const std::string& hash) {
  if (!is_hash(hash)) return nullptr;
  std::string wasm, name;
  // Another replica sharing this cache directory stored it...
  const fs::path file = fs::path(dir_) / (hash + ".wasm");
  std::error_code ec;
  if (fs::exists(file, ec)) {
    wasm = read_file(file.string());
    std::ifstream name_file(fs::path(dir_) / (hash + ".name"));
    std::getline(name_file, name);
  } else if (runtime::SharedState* shared = runtime_.shared_state()) {
    // ... or one uploaded it to the shared state store.
    std::optional<std::pair<std::string, std::string>> found;
    try {
      found = shared->get_program(hash);
    } catch (const runtime::StoreFailure& e) {
      spdlog::warn("program {}: {}", hash, e.what());
    }
    if (!found) return nullptr;
    std::tie(wasm, name) = std::move(*found);
  } else {
    return nullptr;
  }
  if (runtime::sha256_hex(wasm) != hash) {
    spdlog::error("program {}: the shared copy does not match its hash; ignored", hash);
    return nullptr;
  }
  add(std::move(wasm), name, /*share=*/false);
  std::lock_guard lock(mu_);
  auto it = entries_.find(hash);
  return it == entries_.end() ? nullptr : it->second.program;
}

std::shared_ptr<runtime::Program> ProgramStore::get(const std::string& hash) {
  bool miss = false;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(hash);
    if (it != entries_.end() && it->second.program) return it->second.program;
    if (it == entries_.end()) miss = true;
  }
  if (miss) return fetch_elsewhere(hash);
  std::ifstream in(fs::path(dir_) / (hash + ".wasm"), std::ios::binary);
  if (!in) fail("program {}: stored file is missing", hash);
  std::stringstream ss;
  ss << in.rdbuf();
  auto program = runtime_.load_program(ss.str());
  if (program->hash() != hash) fail("program {}: stored file is corrupted (hash mismatch)", hash);
  std::lock_guard lock(mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) return nullptr;  // deleted meanwhile
  if (!it->second.program) it->second.program = std::move(program);
  return it->second.program;
}

}  // namespace pith::server
