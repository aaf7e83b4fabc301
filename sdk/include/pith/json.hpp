// pith/json.hpp: a minimal JSON writer for the reports inferlets send to their clients.
//
//   pith::Json j;
//   j.num("forks", 6).str("answer", text).raw("tokens", pith::Json::array(ids));
//   pith::send(j.dump());                           // {"forks":6,"answer":"...","tokens":[...]}
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <string>
#include <string_view>
#include <vector>

namespace pith {

class Json {
 public:
  // A JSON string literal for s. Control characters and every byte >= 0x80 become \u00XX, so
  // model output that is not UTF-8 stays valid JSON (encode the parsed string as latin-1 to get
  // the bytes back).
  static std::string quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20 || c >= 0x80) {
        char buf[8];
        snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out + "\"";
  }
  template <typename T>
  static std::string array(const std::vector<T>& xs) {
    std::string out = "[";
    for (size_t i = 0; i < xs.size(); ++i) out += (i ? "," : "") + number(xs[i]);
    return out + "]";
  }
  static std::string number(double v) {
    if (!isfinite(v)) return "null";  // JSON has no NaN or infinity
    char buf[32];
    snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }

  Json& num(std::string_view key, double v) { return raw(key, number(v)); }
  Json& str(std::string_view key, std::string_view v) { return raw(key, quote(v)); }
  Json& boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  // Adds an already encoded value (an array, a nested object's dump()).
  Json& raw(std::string_view key, std::string_view encoded) {
    body_ += (body_.empty() ? "" : ",") + quote(key) + ":" + std::string(encoded);
    return *this;
  }
  std::string dump() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace pith
