// safetensors (Hugging Face's weight format): a bounds-checked reader over a memory-mapped file
// and a streaming writer.
//
// Layout: u64 little-endian N, then N bytes of JSON {name: {dtype, shape, data_offsets: [begin,
// end]}, "__metadata__": {string: string}}, then the data section; offsets are relative to it.
// The reader validates the header completely (offsets inside the file, end - begin =
// product(shape) * element size, no two tensors overlapping) before anything is used.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "formats/dtype.h"

namespace pith {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;       // as in the file: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;   // set for the dtypes pith computes with (F32, F16, BF16)
  std::vector<uint64_t> shape;  // row-major: shape.back() is contiguous
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws pith::Error naming the file on any malformed content.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  size_t file_size() const { return file_.size(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// safetensors dtype name of a pith dtype ("F32", "F16", "BF16"); throws for block-quantised types,
// which safetensors cannot hold.
std::string safetensors_dtype_name(DType dtype);

// Writes a safetensors file without holding the tensors in memory: declare every tensor, then
// stream each one's bytes in declaration order. The header is written by the first write().
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void add_tensor(const std::string& name, DType dtype, std::vector<uint64_t> shape);
  // Appends bytes of the current tensor (may be called several times per tensor).
  void write(const void* data, size_t n);
  // Checks every declared byte was written and closes the file.
  void finish();

  uint64_t data_bytes() const { return total_; }

 private:
  void write_header();
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end;
  };
  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<Entry> entries_;
  uint64_t total_ = 0;
  uint64_t written_ = 0;
  bool header_done_ = false;
  std::FILE* out_ = nullptr;
};

}  // namespace pith
