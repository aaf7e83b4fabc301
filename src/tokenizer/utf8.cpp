// UTF-8 helpers (see utf8.h).
#include "tokenizer/utf8.h"

namespace pith::utf8 {

size_t sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

uint32_t decode_at(std::string_view s, size_t pos, size_t* len) {
  *len = 0;
  if (pos >= s.size()) return 0xFFFFFFFF;
  auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  size_t n;
  uint32_t cp;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0xFFFFFFFF;
  }
  if (pos + n > s.size()) return 0xFFFFFFFF;
  for (size_t i = 1; i < n; ++i) {
    auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return 0xFFFFFFFF;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFFFFFF;
  *len = n;
  return cp;
}

size_t valid_sequence_at(std::string_view s, size_t pos) {
  size_t len;
  decode_at(s, pos, &len);
  return len;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = valid_sequence_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t incomplete_suffix_length(std::string_view s) {
  // Look at most 3 bytes back for a lead byte whose sequence runs past the end.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    auto b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = sequence_length(b);
    if (need <= back || b < 0xC2 || b > 0xF4) return 0;  // complete, ASCII or never valid
    // Check the continuation bytes seen so far are consistent with a valid sequence.
    for (size_t i = 1; i < back; ++i) {
      auto c = static_cast<uint8_t>(s[n - back + i]);
      if ((c & 0xC0) != 0x80) return 0;
    }
    if (back >= 2) {
      auto c1 = static_cast<uint8_t>(s[n - back + 1]);
      if (b == 0xE0 && c1 < 0xA0) return 0;  // overlong
      if (b == 0xED && c1 > 0x9F) return 0;  // surrogate
      if (b == 0xF0 && c1 < 0x90) return 0;  // overlong
      if (b == 0xF4 && c1 > 0x8F) return 0;  // > U+10FFFF
    }
    return back;
  }
  return 0;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace pith::utf8
