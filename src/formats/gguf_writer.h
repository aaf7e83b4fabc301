// Writes GGUF v3 files without holding tensor data in memory: set metadata, declare every
// tensor (name, ggml-order dims, dtype), then stream each tensor's bytes in declaration order.
// The header (metadata + tensor infos) is written on the first write(); tensor data is padded
// to `alignment`, as readers (gguf.h, llama.cpp) expect.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace pith {

class GGUFWriter {
 public:
  explicit GGUFWriter(std::string path, uint32_t alignment = 32);
  ~GGUFWriter();
  GGUFWriter(const GGUFWriter&) = delete;
  GGUFWriter& operator=(const GGUFWriter&) = delete;

  // Metadata, written in insertion order. A numeric array value's data must stay valid until
  // the header is written (first write() or finish()).
  void set(const std::string& key, GGUFValue value);
  void set_string(const std::string& key, std::string v) {
    set(key, {GGUFType::STRING, std::move(v)});
  }
  void set_u32(const std::string& key, uint32_t v) { set(key, {GGUFType::U32, uint64_t{v}}); }
  void set_f32(const std::string& key, float v) { set(key, {GGUFType::F32, double{v}}); }
  void set_bool(const std::string& key, bool v) { set(key, {GGUFType::BOOL, v}); }

  // dims in ggml order: dims[0] is the row length.
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, DType dtype);
  // Appends bytes of the current tensor; may span tensor boundaries.
  void write(const void* data, size_t n);
  // Checks every declared byte was written and closes the file.
  void finish();

 private:
  void write_header();
  void put(const void* p, size_t n);
  void put_string(const std::string& s);
  void put_value(const GGUFValue& v);
  void pad_to(uint64_t data_offset);

  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    DType dtype;
    uint64_t offset, bytes;
  };
  std::string path_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;  // declared, with padding
  uint64_t data_pos_ = 0;   // written so far, relative to the data section
  size_t current_ = 0;      // tensor being written
  bool header_done_ = false;
  std::FILE* out_ = nullptr;
};

}  // namespace pith
