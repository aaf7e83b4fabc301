// Streaming GGUF v3 writer (see gguf_writer.h): used by `pith model gen` and by tests that
// build malformed or re-laid-out variants of real models.
#include "formats/gguf_writer.h"

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace pith {

namespace {
size_t scalar_bytes(GGUFType t) {
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
}  // namespace

GGUFWriter::GGUFWriter(std::string path, uint32_t alignment)
    : path_(std::move(path)), alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("{}: GGUF alignment must be a power of two", path_);
  if (alignment != 32) set_u32("general.alignment", alignment);
}

GGUFWriter::~GGUFWriter() {
  if (out_) std::fclose(out_);
}

void GGUFWriter::set(const std::string& key, GGUFValue value) {
  if (header_done_) fail("{}: metadata '{}' set after data was written", path_, key);
  if (key == "general.alignment") {  // must describe the offsets this writer actually uses
    const uint64_t* a = std::get_if<uint64_t>(&value.v);
    if (!a || *a != alignment_)
      fail("{}: general.alignment is fixed by the writer ({}); pass it to the constructor", path_,
           alignment_);
  }
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

void GGUFWriter::add_tensor(const std::string& name, std::vector<uint64_t> dims, DType dtype) {
  if (header_done_) fail("{}: tensor '{}' declared after data was written", path_, name);
  if (dims.empty() || dims.size() > 4) fail("{}: tensor '{}' must have rank 1..4", path_, name);
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const DTypeInfo& info = dtype_info(dtype);
  if (dims[0] % info.block_size != 0)
    fail("{}: tensor '{}': row length {} is not a multiple of the {} block ({})", path_, name,
         dims[0], info.name, info.block_size);
  uint64_t offset = (data_size_ + alignment_ - 1) / alignment_ * alignment_;
  uint64_t bytes = n / info.block_size * info.block_bytes;
  tensors_.push_back({name, std::move(dims), dtype, offset, bytes});
  data_size_ = offset + bytes;
}

void GGUFWriter::put(const void* p, size_t n) {
  if (n > 0 && std::fwrite(p, 1, n, out_) != n)
    fail("{}: write failed: {}", path_, std::strerror(errno));
}

void GGUFWriter::put_string(const std::string& s) {
  uint64_t n = s.size();
  put(&n, 8);
  put(s.data(), s.size());
}

void GGUFWriter::put_value(const GGUFValue& v) {
  auto put_int = [&](uint64_t x, size_t bytes) { put(&x, bytes); };  // little-endian host
  switch (v.type) {
    case GGUFType::U8:
    case GGUFType::U16:
    case GGUFType::U32:
    case GGUFType::U64:
      put_int(std::get<uint64_t>(v.v), scalar_bytes(v.type));
      break;
    case GGUFType::I8:
    case GGUFType::I16:
    case GGUFType::I32:
    case GGUFType::I64:
      put_int(static_cast<uint64_t>(std::get<int64_t>(v.v)), scalar_bytes(v.type));
      break;
    case GGUFType::F32: {
      float f = static_cast<float>(std::get<double>(v.v));
      put(&f, 4);
      break;
    }
    case GGUFType::F64:
      put(&std::get<double>(v.v), 8);
      break;
    case GGUFType::BOOL: {
      uint8_t b = std::get<bool>(v.v) ? 1 : 0;
      put(&b, 1);
      break;
    }
    case GGUFType::STRING:
      put_string(std::get<std::string>(v.v));
      break;
    case GGUFType::ARRAY: {
      const GGUFArray& a = std::get<GGUFArray>(v.v);
      uint32_t et = static_cast<uint32_t>(a.elem_type);
      put(&et, 4);
      put(&a.count, 8);
      if (a.elem_type == GGUFType::STRING) {
        if (a.strings.size() != a.count) fail("{}: string array count mismatch", path_);
        for (const auto& s : a.strings) put_string(s);
      } else {
        size_t es = scalar_bytes(a.elem_type);
        if (es == 0) fail("{}: invalid array element type {}", path_, et);
        put(a.data, a.count * es);
      }
      break;
    }
  }
}

void GGUFWriter::write_header() {
  out_ = std::fopen(path_.c_str(), "wb");
  if (!out_) fail("{}: cannot create: {}", path_, std::strerror(errno));
  put("GGUF", 4);
  uint32_t version = 3;
  put(&version, 4);
  uint64_t n_tensors = tensors_.size(), n_kv = kv_.size();
  put(&n_tensors, 8);
  put(&n_kv, 8);
  for (const auto& [k, v] : kv_) {
    put_string(k);
    uint32_t t = static_cast<uint32_t>(v.type);
    put(&t, 4);
    put_value(v);
  }
  for (const auto& t : tensors_) {
    put_string(t.name);
    uint32_t rank = static_cast<uint32_t>(t.dims.size());
    put(&rank, 4);
    for (uint64_t d : t.dims) put(&d, 8);
    uint32_t type = static_cast<uint32_t>(t.dtype);
    put(&type, 4);
    put(&t.offset, 8);
  }
  long pos = std::ftell(out_);
  if (pos < 0) fail("{}: ftell failed", path_);
  static const char zeros[64] = {};
  size_t pad = (alignment_ - static_cast<uint64_t>(pos) % alignment_) % alignment_;
  while (pad > 0) {
    size_t k = std::min(pad, sizeof zeros);
    put(zeros, k);
    pad -= k;
  }
  header_done_ = true;
}

void GGUFWriter::pad_to(uint64_t offset) {
  static const char zeros[64] = {};
  while (data_pos_ < offset) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(offset - data_pos_, sizeof zeros));
    put(zeros, k);
    data_pos_ += k;
  }
}

void GGUFWriter::write(const void* data, size_t n) {
  if (!header_done_) write_header();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    while (current_ < tensors_.size() &&
           data_pos_ >= tensors_[current_].offset + tensors_[current_].bytes)
      ++current_;
    if (current_ == tensors_.size()) fail("{}: more tensor data written than declared", path_);
    pad_to(tensors_[current_].offset);
    uint64_t left = tensors_[current_].offset + tensors_[current_].bytes - data_pos_;
    size_t k = static_cast<size_t>(std::min<uint64_t>(left, n));
    put(p, k);
    data_pos_ += k;
    p += k;
    n -= k;
  }
}

void GGUFWriter::finish() {
  if (!header_done_) write_header();
  if (data_pos_ != data_size_)
    fail("{}: {} bytes of tensor data written, {} declared", path_, data_pos_, data_size_);
  int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
}

}  // namespace pith
