// Scratch files for the fuzz targets whose parsers read files (GGUF, safetensors, Hugging Face
// model folders): one private directory per fuzzing process, in /dev/shm when there is one so the
// bytes stay in memory, removed at exit.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <string>

namespace pith::fuzz {

inline const std::string& scratch_dir() {
  struct Dir {
    Dir() {
      const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
      path = std::string(base) + "/pith-fuzz-" + std::to_string(getpid());
      mkdir(path.c_str(), 0700);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
    std::string path;
  };
  static const Dir dir;
  return dir.path;
}

// Writes the input to scratch_dir()/name and returns the path ("" if it cannot be written).
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return "";
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = std::fclose(f) == 0 && ok;
  return ok ? path : "";
}

}  // namespace pith::fuzz
