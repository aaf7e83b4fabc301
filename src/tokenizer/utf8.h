// UTF-8 helpers shared by the tokenizers and the streaming decoder: sequence lengths,
// validation and code-point encoding. Byte-level tokenizers must cope with arbitrary bytes
// (invalid input, tokens that split a character), so everything here is total: no function
// throws or reads past the given range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pith::utf8 {

// Length of the sequence announced by lead byte `b` (1..4); 1 for continuation bytes and
// bytes that can never start a sequence (0x80..0xBF, 0xF8..0xFF), as llama.cpp does.
size_t sequence_length(uint8_t b);

// Length of the valid UTF-8 sequence starting at s[pos], or 0 when the bytes there are not a
// complete, well-formed sequence (overlong, surrogate, > U+10FFFF, truncated, stray byte).
size_t valid_sequence_at(std::string_view s, size_t pos);

// True when the whole string is well-formed UTF-8.
bool is_valid(std::string_view s);

// Number of bytes at the end of `s` that start an incomplete (but so far well-formed)
// multi-byte sequence: 0..3. The streaming decoder holds those back until more bytes arrive.
size_t incomplete_suffix_length(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (must be <= 0x10FFFF).
void append(std::string& out, uint32_t cp);

// Decodes the valid sequence at s[pos] (see valid_sequence_at); returns 0xFFFFFFFF when invalid.
uint32_t decode_at(std::string_view s, size_t pos, size_t* len);

}  // namespace pith::utf8
