// Python printf-style formatting (`"%s: %d" % (name, n)` and the `format` filter), for the
// conversions templates use: %s %r %d %i %f %F %e %E %g %G %x %X %o %c %% with flags, width,
// precision and `%(key)s` mapping keys.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

std::string pad(std::string s, size_t width, bool left_align, char fill = ' ') {
  size_t len = text::length(s);
  if (len >= width) return s;
  if (left_align) {
    s.append(width - len, fill);
    return s;
  }
  std::string out(width - len, fill);
  out.append(s);
  return out;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  List positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple())
    positional = args.as_list();
  else if (args.is_dict())
    mapping = &args.as_dict();
  else
    positional.push_back(args);
  size_t next_arg = 0;
  auto take = [&](const std::string& key) -> Value {
    if (!key.empty()) {
      if (!mapping) fail("format requires a mapping");
      const Value* v = mapping->find(key);
      if (!v) fail("KeyError: '{}'", key);
      return *v;
    }
    if (mapping && positional.empty()) return args;
    if (next_arg >= positional.size()) fail("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    char c = format[i];
    if (c != '%') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (++i >= format.size()) fail("incomplete format");
    std::string key;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      key = format.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string("-+ 0#").find(format[i]) != std::string::npos)
      flags.push_back(format[i++]);
    size_t width = 0;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
      width = width * 10 + (format[i++] - '0');
    int precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = 0;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
        precision = precision * 10 + (format[i++] - '0');
    }
    if (i >= format.size()) fail("incomplete format");
    if (width > 4096 || precision > 4096) fail("format width or precision too large");
    char type = format[i++];
    bool left = flags.find('-') != std::string::npos;
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    Value v = take(key);
    switch (type) {
      case 's':
      case 'r': {
        std::string s = type == 's' ? v.str() : v.repr();
        if (precision >= 0) {
          std::u32string u = text::decode(s);
          if (u.size() > static_cast<size_t>(precision))
            s = text::encode(u.substr(0, static_cast<size_t>(precision)));
        }
        out += pad(s, width, left);
        break;
      }
      case 'c': {
        std::string s;
        if (v.is_int())
          text::append_utf8(s, static_cast<char32_t>(v.as_int()));
        else if (v.is_string() && text::length(v.as_string()) == 1)
          s = v.as_string();
        else
          fail("%c requires an int or a single character");
        out += pad(s, width, left);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (v.is_undefined()) fail("{}", v.undefined_hint());
        if (!v.is_number())
          fail("%{} format: a real number is required, not {}", type, v.type_name());
        std::string spec = "%";
        spec.append(flags);
        if (width) spec.append(std::to_string(width));
        if (precision >= 0) {
          spec.push_back('.');
          spec.append(std::to_string(precision));
        }
        char buf[8192];
        if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o') {
          int64_t n = v.is_float() ? double_to_int(v.as_double()) : v.as_int();
          spec.append("ll");
          spec.push_back(type == 'i' ? 'd' : type);
          std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(n));
        } else {
          spec.push_back(type);
          std::snprintf(buf, sizeof buf, spec.c_str(), v.as_double());
        }
        out += buf;
        break;
      }
      default:
        fail("unsupported format character '{}'", type);
    }
  }
  // Python treats any non-tuple object with __getitem__ (list, dict) like a mapping here.
  bool getitem_like = (args.is_list() && !args.is_tuple()) || args.is_undefined();
  if (!mapping && !getitem_like && next_arg < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace pith::jinja
