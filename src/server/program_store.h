// ProgramStore: the server's uploaded inferlets, by SHA-256. Uploads are validated (parsed for
// the interpreter tier; the native build starts in the background and lands in the runtime's
// native cache), written to <dir>/<hash>.wasm and found there again after a restart, where
// they are loaded lazily at their first launch. Built-in programs (the OpenAI completion
// inferlet) are registered from bytes compiled into the binary and cannot be deleted.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/runtime.h"

namespace pith::server {

struct ProgramInfo {
  std::string hash;
  std::string name;  // built-in name, or the name given at upload ("" if none)
  size_t size = 0;
  int64_t uploaded_at = 0;  // unix seconds
  bool builtin = false;
  bool loaded = false;
  bool native_ready = false;
  bool native_building = false;  // its native build is still running
  double compile_seconds = 0;
};

// The program was valid but could not be stored (a full disk, a read-only cache dir).
class ProgramStorageError : public pith::Error {
 public:
  using pith::Error::Error;
};

class ProgramStore {
 public:
  ProgramStore(std::string dir, runtime::Runtime& runtime);

  // Validates and stores `wasm`. Returns the entry and whether it was already there. Throws
  // pith::Error with the validation failure.
  std::pair<ProgramInfo, bool> upload(std::string wasm, const std::string& name = "");
  // Registers a program compiled into the server under `name`.
  ProgramInfo add_builtin(const std::string& name, std::string wasm);

  std::optional<ProgramInfo> find(const std::string& hash) const;
  std::optional<std::string> builtin_hash(const std::string& name) const;
  std::vector<ProgramInfo> list() const;
  // False if absent; throws pith::Error for a built-in.
  bool remove(const std::string& hash);

  // The loaded program (loading a stored file at first use; one this replica never saw comes
  // from a shared cache directory or the shared state store); nullptr if unknown. Throws
  // pith::Error if the stored file no longer validates.
  std::shared_ptr<runtime::Program> get(const std::string& hash);

 private:
  struct Entry {
    ProgramInfo info;
    std::shared_ptr<runtime::Program> program;
  };
  ProgramInfo describe(const Entry& e) const;
  std::pair<ProgramInfo, bool> add(std::string wasm, const std::string& name, bool share);
  // A program this store has not seen: from a cache directory shared with other replicas, or
  // from the shared state store (--state-store). nullptr if neither has it.
  std::shared_ptr<runtime::Program> fetch_elsewhere(const std::string& hash);

  const std::string dir_;
  runtime::Runtime& runtime_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace pith::server
