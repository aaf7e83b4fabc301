// GPT-2 byte-to-unicode mapping (see byte_unicode.h).
#include "tokenizer/byte_unicode.h"

#include "tokenizer/utf8.h"

namespace pith {

ByteUnicode::ByteUnicode() {
  from_cp_.fill(-1);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    to_cp_[b] = printable ? static_cast<uint32_t>(b) : next++;
    from_cp_[to_cp_[b]] = static_cast<int16_t>(b);
    utf8::append(to_text_[b], to_cp_[b]);
  }
}

std::string ByteUnicode::encode(std::string_view raw) const {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += to_text_[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> ByteUnicode::decode(std::string_view mapped) const {
  std::string out;
  out.reserve(mapped.size());
  for (size_t i = 0; i < mapped.size();) {
    size_t len;
    uint32_t cp = utf8::decode_at(mapped, i, &len);
    if (len == 0 || cp >= from_cp_.size() || from_cp_[cp] < 0) return std::nullopt;
    out += static_cast<char>(from_cp_[cp]);
    i += len;
  }
  return out;
}

}  // namespace pith
