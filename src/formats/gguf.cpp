#include "formats/gguf.h"

#include <cstring>
#include <limits>

#include "common/error.h"

namespace pith {

namespace {

// Sequential reader over [pos, end) that throws instead of reading past the end.
class Cursor {
 public:
  Cursor(const uint8_t* begin, const uint8_t* end, const std::string& path)
      : begin_(begin), pos_(begin), end_(end), path_(path) {}

  size_t offset() const { return static_cast<size_t>(pos_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > remaining())
      fail("{}: truncated file: {} needs {} bytes at offset {}, only {} left", path_, what, n,
           offset(), remaining());
    const uint8_t* p = pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const uint8_t* begin_;
  const uint8_t* pos_;
  const uint8_t* end_;
  const std::string& path_;
};

size_t scalar_size(GGUFType t) {
  switch (t) {
    case GGUFType::U8:
    case GGUFType::I8:
    case GGUFType::BOOL:
      return 1;
    case GGUFType::U16:
    case GGUFType::I16:
      return 2;
    case GGUFType::U32:
    case GGUFType::I32:
    case GGUFType::F32:
      return 4;
    case GGUFType::U64:
    case GGUFType::I64:
    case GGUFType::F64:
      return 8;
    default:
      return 0;
  }
}

bool valid_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GGUFType::F64);
}

GGUFValue read_scalar(Cursor& c, GGUFType t, const char* what) {
  GGUFValue v{t, uint64_t{0}};
  switch (t) {
    case GGUFType::U8:
      v.v = uint64_t{c.read<uint8_t>(what)};
      break;
    case GGUFType::U16:
      v.v = uint64_t{c.read<uint16_t>(what)};
      break;
    case GGUFType::U32:
      v.v = uint64_t{c.read<uint32_t>(what)};
      break;
    case GGUFType::U64:
      v.v = c.read<uint64_t>(what);
      break;
    case GGUFType::I8:
      v.v = int64_t{c.read<int8_t>(what)};
      break;
    case GGUFType::I16:
      v.v = int64_t{c.read<int16_t>(what)};
      break;
    case GGUFType::I32:
      v.v = int64_t{c.read<int32_t>(what)};
      break;
    case GGUFType::I64:
      v.v = c.read<int64_t>(what);
      break;
    case GGUFType::F32:
      v.v = double{c.read<float>(what)};
      break;
    case GGUFType::F64:
      v.v = c.read<double>(what);
      break;
    case GGUFType::BOOL:
      v.v = c.read<uint8_t>(what) != 0;
      break;
    case GGUFType::STRING:
      v.v = c.read_string(what);
      break;
    default:
      break;
  }
  return v;
}

const char* type_name(GGUFType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "?";
}

}  // namespace

GGUFFile::GGUFFile(const std::string& path) : file_(path) {
  Cursor c(file_.data(), file_.data() + file_.size(), file_.path());
  if (file_.size() < 4 || std::memcmp(file_.data(), "GGUF", 4) != 0)
    bad("not a GGUF file (bad magic)");
  c.take(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) bad("unsupported GGUF version " + std::to_string(version_));
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each entry needs at least a few bytes: reject absurd counts before allocating.
  if (n_kv > c.remaining() / 12)
    bad("metadata count " + std::to_string(n_kv) + " exceeds file size");
  if (n_tensors > c.remaining() / 24)
    bad("tensor count " + std::to_string(n_tensors) + " exceeds file size");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    uint32_t t = c.read<uint32_t>("metadata type");
    if (!valid_type(t)) bad("metadata '" + key + "' has invalid type " + std::to_string(t));
    GGUFValue value{static_cast<GGUFType>(t), uint64_t{0}};
    if (value.type == GGUFType::ARRAY) {
      GGUFArray arr;
      uint32_t et = c.read<uint32_t>("array type");
      if (!valid_type(et) || et == static_cast<uint32_t>(GGUFType::ARRAY))
        bad("metadata '" + key + "' has invalid array element type " + std::to_string(et));
      arr.elem_type = static_cast<GGUFType>(et);
      arr.count = c.read<uint64_t>("array length");
      if (arr.elem_type == GGUFType::STRING) {
        if (arr.count > c.remaining() / 8)
          bad("metadata '" + key + "': array length exceeds file size");
        arr.strings.reserve(arr.count);
        for (uint64_t j = 0; j < arr.count; ++j)
          arr.strings.push_back(c.read_string("array string"));
      } else {
        size_t es = scalar_size(arr.elem_type);
        if (arr.count > c.remaining() / es)
          bad("metadata '" + key + "': array extends past end of file");
        arr.data = c.take(arr.count * es, "array data");
      }
      value.v = std::move(arr);
    } else {
      value = read_scalar(c, value.type, "metadata value");
    }
    if (!kv_.emplace(key, std::move(value)).second) bad("duplicate metadata key '" + key + "'");
  }

  uint64_t alignment = get_uint_or("general.alignment", 32);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    bad("general.alignment must be a power of two");

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GGUFTensorInfo ti;
    ti.name = c.read_string("tensor name");
    uint32_t n_dims = c.read<uint32_t>("tensor rank");
    if (n_dims == 0 || n_dims > 4)
      bad("tensor '" + ti.name + "' has rank " + std::to_string(n_dims));
    ti.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = c.read<uint64_t>("tensor dims");
      if (dim == 0 || dim > (uint64_t{1} << 40))
        bad("tensor '" + ti.name + "' has invalid dimension");
      ti.dims.push_back(dim);
      if (ti.n_elements > std::numeric_limits<uint64_t>::max() / dim)
        bad("tensor '" + ti.name + "' is too large");
      ti.n_elements *= dim;
    }
    uint32_t type = c.read<uint32_t>("tensor type");
    auto info = dtype_info(type);
    if (!info)
      bad("tensor '" + ti.name + "' has ggml type " + ggml_type_name(type) + " (" +
          std::to_string(type) +
          "), which pith does not implement (supported: " + supported_dtype_names() + ")");
    ti.dtype = info->type;
    if (ti.dims[0] % info->block_size != 0)
      bad("tensor '" + ti.name + "': row length not a multiple of the " + std::string(info->name) +
          " block");
    ti.n_bytes = ti.n_elements / info->block_size * info->block_bytes;
    ti.offset = c.read<uint64_t>("tensor offset");
    if (ti.offset % alignment != 0) bad("tensor '" + ti.name + "' offset is not aligned");
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second)
      bad("duplicate tensor '" + ti.name + "'");
    tensors_.push_back(std::move(ti));
  }

  uint64_t data_start = (c.offset() + alignment - 1) / alignment * alignment;
  if (data_start > file_.size() && n_tensors > 0) bad("truncated file: no tensor data section");
  for (auto& ti : tensors_) {
    uint64_t begin = data_start + ti.offset;
    if (ti.offset > file_.size() || begin > file_.size() || ti.n_bytes > file_.size() - begin)
      bad("tensor '" + ti.name + "' extends past end of file (truncated?)");
    ti.data = file_.data() + begin;
  }
}

void GGUFFile::bad(const std::string& what) const {
  fail("{}: {}", file_.path(), what);
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GGUFTensorInfo* GGUFFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GGUFValue& GGUFFile::require(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) bad("missing metadata key '" + key + "'");
  return *v;
}

std::string GGUFFile::get_string(const std::string& key) const {
  const auto& v = require(key);
  if (v.type != GGUFType::STRING)
    bad("metadata '" + key + "' is " + type_name(v.type) + ", expected string");
  return std::get<std::string>(v.v);
}

std::optional<std::string> GGUFFile::get_string_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

uint64_t GGUFFile::get_uint(const std::string& key) const {
  const auto& v = require(key);
  if (auto* u = std::get_if<uint64_t>(&v.v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v.v); i && *i >= 0) return static_cast<uint64_t>(*i);
  bad("metadata '" + key + "' is " + type_name(v.type) + ", expected a non-negative integer");
}

uint64_t GGUFFile::get_uint_or(const std::string& key, uint64_t fallback) const {
  return has(key) ? get_uint(key) : fallback;
}

int64_t GGUFFile::get_int_or(const std::string& key, int64_t fallback) const {
  const GGUFValue* v = find(key);
  if (!v) return fallback;
  if (auto* i = std::get_if<int64_t>(&v->v)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v->v); u && *u <= uint64_t(INT64_MAX))
    return static_cast<int64_t>(*u);
  bad("metadata '" + key + "' is " + type_name(v->type) + ", expected an integer");
}

double GGUFFile::get_float(const std::string& key) const {
  const auto& v = require(key);
  if (auto* d = std::get_if<double>(&v.v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&v.v)) return static_cast<double>(*i);
  bad("metadata '" + key + "' is " + type_name(v.type) + ", expected a number");
}

double GGUFFile::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GGUFFile::get_bool_or(const std::string& key, bool fallback) const {
  const GGUFValue* v = find(key);
  if (!v) return fallback;
  if (auto* b = std::get_if<bool>(&v->v)) return *b;
  bad("metadata '" + key + "' is " + type_name(v->type) + ", expected bool");
}

const std::vector<std::string>& GGUFFile::get_string_array(const std::string& key) const {
  const auto& v = require(key);
  auto* a = std::get_if<GGUFArray>(&v.v);
  if (!a || a->elem_type != GGUFType::STRING) bad("metadata '" + key + "' is not a string array");
  return a->strings;
}

namespace {
template <typename Out>
std::vector<Out> convert_array(const GGUFArray& a) {
  std::vector<Out> out(a.count);
  size_t es = scalar_size(a.elem_type);
  for (uint64_t i = 0; i < a.count; ++i) {
    const uint8_t* p = a.data + i * es;
    switch (a.elem_type) {
      case GGUFType::U8:
        out[i] = static_cast<Out>(*p);
        break;
      case GGUFType::I8:
        out[i] = static_cast<Out>(static_cast<int8_t>(*p));
        break;
      case GGUFType::BOOL:
        out[i] = static_cast<Out>(*p != 0);
        break;
#define PITH_CONV(T, TYPE)        \
  case GGUFType::TYPE: {          \
    T x;                          \
    std::memcpy(&x, p, sizeof x); \
    out[i] = static_cast<Out>(x); \
    break;                        \
  }
        // clang-format off
      PITH_CONV(uint16_t, U16) PITH_CONV(int16_t, I16) PITH_CONV(uint32_t, U32)
      PITH_CONV(int32_t, I32) PITH_CONV(float, F32) PITH_CONV(uint64_t, U64)
      PITH_CONV(int64_t, I64) PITH_CONV(double, F64)
        // clang-format on
#undef PITH_CONV
                    default : break;
    }
  }
  return out;
}
}  // namespace

std::vector<float> GGUFFile::get_f32_array(const std::string& key) const {
  const auto& v = require(key);
  auto* a = std::get_if<GGUFArray>(&v.v);
  if (!a || a->elem_type == GGUFType::STRING) bad("metadata '" + key + "' is not a numeric array");
  return convert_array<float>(*a);
}

std::vector<int32_t> GGUFFile::get_i32_array(const std::string& key) const {
  const auto& v = require(key);
  auto* a = std::get_if<GGUFArray>(&v.v);
  if (!a || a->elem_type == GGUFType::STRING) bad("metadata '" + key + "' is not a numeric array");
  return convert_array<int32_t>(*a);
}

}  // namespace pith
