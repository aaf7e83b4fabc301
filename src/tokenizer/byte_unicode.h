// The GPT-2 byte-to-unicode mapping used by byte-level BPE vocabularies (GPT-2, Llama 3,
// Qwen): every byte 0..255 is shown as one printable code point, so that a token's text in
// the vocab (e.g. "Ġthe" for " the") is valid UTF-8 whatever bytes it stands for.
// Printable Latin-1 bytes map to themselves; the other 68 bytes map to U+0100.. in order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pith {

class ByteUnicode {
 public:
  ByteUnicode();

  // The code point that stands for byte `b`, and its UTF-8 text.
  uint32_t code_point(uint8_t b) const { return to_cp_[b]; }
  const std::string& text(uint8_t b) const { return to_text_[b]; }

  // Raw bytes → mapped text ("hi there" → "hiĠthere").
  std::string encode(std::string_view raw) const;

  // Mapped text → raw bytes. Returns nullopt when some code point is not in the mapping
  // (e.g. an added token written in plain text).
  std::optional<std::string> decode(std::string_view mapped) const;

 private:
  std::array<uint32_t, 256> to_cp_{};
  std::array<std::string, 256> to_text_;
  std::array<int16_t, 324> from_cp_{};  // code point (< 324) → byte, or -1
};

}  // namespace pith
