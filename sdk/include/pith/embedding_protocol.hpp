// pith/embedding_protocol.hpp: the messages from the built-in openai_embedding inferlet
// (inferlets/openai_embedding) to `pith serve`'s /v1/embeddings (src/server/embedding_routes.cpp).
// One message per pith::send, plain text:
//
//   emb <input> <prompt_tokens> <cached_tokens> <base64 of the float32 values, little-endian>
//   error <code> <text>        (openai_protocol.hpp's ErrorMessage: a pith_status_t and why)
//
// The values travel exactly (base64 of their bytes, as OpenAI's encoding_format "base64"), a
// third more than the raw bytes where decimal text would be three times as much.
// Header-only, no exceptions (inferlets build with -fno-exceptions).
#pragma once

#include <stdint.h>
#include <string.h>

#include <pith/openai_protocol.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace pith::embedding_protocol {

struct EmbeddingMessage {
  uint32_t input = 0;  // index into the request's inputs
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // of the input, served by the prefix cache
  std::vector<float> values;
};

// Standard base64 (RFC 4648, '+' '/', '=' padding) of the values' bytes on a little-endian host.
inline std::string base64_floats(const std::vector<float>& v) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = reinterpret_cast<const uint8_t*>(v.data());
  const size_t n = v.size() * 4;
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t w = uint32_t{b[i]} << 16 | (i + 1 < n ? uint32_t{b[i + 1]} << 8 : 0) |
                       (i + 2 < n ? uint32_t{b[i + 2]} : 0);
    out += kAlphabet[w >> 18 & 63];
    out += kAlphabet[w >> 12 & 63];
    out += i + 1 < n ? kAlphabet[w >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[w & 63] : '=';
  }
  return out;
}

// The inverse of base64_floats; false for text that is not base64 of whole float32 values.
inline bool floats_of_base64(std::string_view s, std::vector<float>& out) {
  if (s.size() % 4 != 0) return false;
  std::string bytes;
  bytes.reserve(s.size() / 4 * 3);
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    const int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
    uint32_t w = 0;
    for (int j = 0; j < 4; ++j) {
      const int v = j >= 4 - pad ? 0 : value(s[i + j]);
      if (v < 0) return false;
      w = w << 6 | static_cast<uint32_t>(v);
    }
    bytes += static_cast<char>(w >> 16 & 255);
    if (pad < 2) bytes += static_cast<char>(w >> 8 & 255);
    if (pad < 1) bytes += static_cast<char>(w & 255);
  }
  if (bytes.size() % 4 != 0) return false;
  out.resize(bytes.size() / 4);
  memcpy(out.data(), bytes.data(), bytes.size());
  return true;
}

inline std::string encode(const EmbeddingMessage& m) {
  return "emb " + std::to_string(m.input) + " " + std::to_string(m.prompt_tokens) + " " +
         std::to_string(m.cached_tokens) + " " + base64_floats(m.values);
}

// Parses an emb message. Returns false with `error` naming what is wrong.
inline bool parse(std::string_view text, EmbeddingMessage& out, std::string& error) {
  using openai_protocol::detail::malformed;
  using openai_protocol::detail::next_word;
  std::string_view rest = text;
  std::string_view kind = next_word(rest);
  if (kind != "emb") return malformed(error, "unknown message kind", kind);
  std::string_view i = next_word(rest), p = next_word(rest), c = next_word(rest),
                   v = next_word(rest);
  if (!openai_protocol::detail::parse_u32(i, out.input))
    return malformed(error, "emb: bad input", i);
  if (!openai_protocol::detail::parse_u32(p, out.prompt_tokens))
    return malformed(error, "emb: bad prompt_tokens", p);
  if (!openai_protocol::detail::parse_u32(c, out.cached_tokens))
    return malformed(error, "emb: bad cached_tokens", c);
  if (v.empty() || !floats_of_base64(v, out.values))
    return malformed(error, "emb: bad values", v.substr(0, 16));
  if (!next_word(rest).empty())
    return malformed(error, "emb: trailing text in", text.substr(0, 40));
  return true;
}

}  // namespace pith::embedding_protocol
