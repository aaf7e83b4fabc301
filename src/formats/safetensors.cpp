// safetensors reader and streaming writer (see safetensors.h). The reader trusts nothing in the
// header: every offset, size and dtype is checked before a tensor pointer is handed out.
#include "formats/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace pith {

namespace {

struct StDType {
  const char* name;
  uint64_t size;
  std::optional<DType> dtype;
};

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the format's own limit is 100 MB

const StDType* find_dtype(const std::string& name) {
  static const StDType kTypes[] = {
      {"F32", 4, DType::F32},    {"F16", 2, DType::F16},       {"BF16", 2, DType::BF16},
      {"F64", 8, std::nullopt},  {"I64", 8, std::nullopt},     {"U64", 8, std::nullopt},
      {"I32", 4, std::nullopt},  {"U32", 4, std::nullopt},     {"I16", 2, std::nullopt},
      {"U16", 2, std::nullopt},  {"I8", 1, std::nullopt},      {"U8", 1, std::nullopt},
      {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
  };
  for (const auto& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

uint64_t json_u64(const nlohmann::json& j, const std::string& path, const std::string& what) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
    fail("{}: {} must be a non-negative integer", path, what);
  return j.get<uint64_t>();
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  auto bad = [&](const std::string& what) { fail("{}: {}", path, what); };
  if (file_.size() < 8) bad("truncated safetensors file (no header length)");
  uint64_t n;
  std::memcpy(&n, file_.data(), 8);
  if (n < 2 || n > kMaxHeader) bad(fmt::format("invalid safetensors header length {}", n));
  if (n > file_.size() - 8)
    bad(fmt::format("truncated safetensors file: header needs {} bytes, file has {}", n,
                    file_.size() - 8));
  const char* hdr = reinterpret_cast<const char*>(file_.data() + 8);
  nlohmann::json j = nlohmann::json::parse(hdr, hdr + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("safetensors header is not valid JSON");
  if (!j.is_object()) bad("safetensors header is not a JSON object");
  const uint8_t* data = file_.data() + 8 + n;
  const uint64_t data_size = file_.size() - 8 - n;

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad("__metadata__ value '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) bad(where + " is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad(where + " has no dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) bad(where + " has no shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      bad(where + " has no data_offsets [begin, end]");
    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = v["dtype"].get<std::string>();
    const StDType* dt = find_dtype(t.dtype_name);
    if (!dt) bad(where + " has unknown dtype '" + t.dtype_name + "'");
    t.dtype = dt->dtype;
    t.n_elements = 1;
    for (const auto& d : v["shape"]) {
      uint64_t dim = json_u64(d, path, where + " shape");
      if (dim != 0 && t.n_elements > std::numeric_limits<uint64_t>::max() / dt->size / dim)
        bad(where + " is too large");
      t.shape.push_back(dim);
      t.n_elements *= dim;
    }
    uint64_t begin = json_u64(v["data_offsets"][0], path, where + " data_offsets");
    uint64_t end = json_u64(v["data_offsets"][1], path, where + " data_offsets");
    if (begin > end) bad(where + " has data_offsets begin > end");
    if (end > data_size)
      bad(
          fmt::format("{} extends past end of file (data ends at {}, file data section is {} "
                      "bytes; truncated?)",
                      where, end, data_size));
    t.n_bytes = end - begin;
    if (t.n_bytes != t.n_elements * dt->size)
      bad(fmt::format("{} has {} bytes of data but shape [{}] of {} needs {}", where, t.n_bytes,
                      fmt::join(t.shape, ", "), t.dtype_name, t.n_elements * dt->size));
    t.data = data + begin;
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // No two tensors may share bytes.
  std::vector<const SafetensorsTensor*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->data + order[i - 1]->n_bytes > order[i]->data)
      bad("tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap");
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::string safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    default:
      fail("dtype {} cannot be stored in safetensors (use GGUF)", dtype_info(dtype).name);
  }
}

SafetensorsWriter::SafetensorsWriter(const std::string& path,
                                     std::map<std::string, std::string> metadata)
    : path_(path), metadata_(std::move(metadata)) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_) std::fclose(out_);
}

void SafetensorsWriter::add_tensor(const std::string& name, DType dtype,
                                   std::vector<uint64_t> shape) {
  if (header_done_) fail("{}: tensor '{}' declared after data was written", path_, name);
  safetensors_dtype_name(dtype);
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  uint64_t bytes = n * dtype_info(dtype).block_bytes;
  entries_.push_back({name, dtype, std::move(shape), total_, total_ + bytes});
  total_ += bytes;
}

void SafetensorsWriter::write_header() {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata_.empty()) j["__metadata__"] = metadata_;
  for (const auto& e : entries_)
    j[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {e.begin, e.end}}};
  std::string hdr = j.dump();
  hdr.append((8 - hdr.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  out_ = std::fopen(path_.c_str(), "wb");
  if (!out_) fail("{}: cannot create: {}", path_, std::strerror(errno));
  uint64_t n = hdr.size();
  if (std::fwrite(&n, 8, 1, out_) != 1 ||
      std::fwrite(hdr.data(), 1, hdr.size(), out_) != hdr.size())
    fail("{}: write failed: {}", path_, std::strerror(errno));
  header_done_ = true;
}

void SafetensorsWriter::write(const void* data, size_t n) {
  if (!header_done_) write_header();
  if (n > total_ - written_) fail("{}: more data written than declared", path_);
  if (n > 0 && std::fwrite(data, 1, n, out_) != n)
    fail("{}: write failed: {}", path_, std::strerror(errno));
  written_ += n;
}

void SafetensorsWriter::finish() {
  if (!header_done_) write_header();
  if (written_ != total_)
    fail("{}: {} bytes of tensor data written, {} declared", path_, written_, total_);
  int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
}

}  // namespace pith
