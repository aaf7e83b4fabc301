// GGUF (llama.cpp's single-file model format, versions 2 and 3): a bounds-checked reader over a
// memory-mapped file. Every offset and size is validated before use; a malformed or truncated
// file raises pith::Error naming the file and the problem, never an out-of-bounds read.
//
// Layout: "GGUF" u32 version, u64 n_tensors, u64 n_kv, then n_kv (key, type, value) entries,
// then n_tensors (name, n_dims, dims[], ggml_type, offset) infos, then tensor data starting at
// the next multiple of `general.alignment` (default 32). All little-endian.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/mapped_file.h"
#include "formats/dtype.h"

namespace pith {

enum class GGUFType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// An array value. Numeric arrays point into the mapping (no copy: a 128k-entry score array
// stays in the file); string arrays are decoded once.
struct GGUFArray {
  GGUFType elem_type;
  uint64_t count = 0;
  const uint8_t* data = nullptr;     // numeric element data, little-endian
  std::vector<std::string> strings;  // when elem_type == STRING
};

struct GGUFValue {
  GGUFType type;
  std::variant<uint64_t, int64_t, double, bool, std::string, GGUFArray> v;
};

struct GGUFTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (innermost) dimension
  DType dtype;
  uint64_t offset;  // relative to the data section
  uint64_t n_elements;
  uint64_t n_bytes;
  const uint8_t* data;  // into the mapping
};

class GGUFFile {
 public:
  // Maps and parses `path`. Throws pith::Error on any malformed content.
  explicit GGUFFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  size_t file_size() const { return file_.size(); }

  const std::map<std::string, GGUFValue>& metadata() const { return kv_; }
  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(const std::string& name) const;

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GGUFValue* find(const std::string& key) const;

  // Typed getters. The *_or variants return the fallback when the key is absent; all of them
  // throw pith::Error when the key exists with an incompatible type.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  uint64_t get_uint_or(const std::string& key, uint64_t fallback) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;

 private:
  [[noreturn]] void bad(const std::string& what) const;
  const GGUFValue& require(const std::string& key) const;

  MappedFile file_;
  uint32_t version_ = 0;
  std::map<std::string, GGUFValue> kv_;
  std::vector<GGUFTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace pith
