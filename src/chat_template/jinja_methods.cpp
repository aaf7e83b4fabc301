// Methods of str, dict and list values that chat templates call (`content.strip()`,
// `tool.items()`, `message.get('x')`), with Python's semantics. The sandbox Hugging Face uses
// (ImmutableSandboxedEnvironment) forbids mutating methods such as list.append or dict.update;
// they are reported as errors here too.
#include <fmt/format.h>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

// A string argument or a tuple/list of them (str.startswith((a, b))).
std::vector<std::string> string_or_tuple(const std::optional<Value>& v, const std::string& what) {
  if (!v) fail("{} missing required argument", what);
  if (v->is_string()) return {v->as_string()};
  if (v->is_list()) {
    std::vector<std::string> out;
    for (const auto& e : v->as_list()) {
      if (!e.is_string()) fail("{} expects str or a tuple of str", what);
      out.push_back(e.as_string());
    }
    return out;
  }
  fail("{} expects str or a tuple of str, got {}", what, v->type_name());
}

const std::string* optional_chars(const std::optional<Value>& v, const std::string& what) {
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) fail("{} arg must be None or str", what);
  return &v->as_string();
}

// Python str.format for plain fields: "{}", "{0}", "{name}", "{{", "}}". Format specs and
// attribute/index access inside fields are rejected with an error naming them.
std::string brace_format(const std::string& s, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}')
        ++i;
      else
        fail("Single '}}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = s.find('}', i);
    if (close == std::string::npos) fail("Single '{{' encountered in format string");
    std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of(":!.[") != std::string::npos)
      fail("unsupported construct: str.format field '{{{}}}'", field);
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t idx = field.empty() ? auto_index++ : std::stoul(field.substr(0, 6));
      if (idx >= args.positional.size())
        fail("Replacement index {} out of range for positional args tuple", idx);
      v = &args.positional[idx];
    } else {
      for (const auto& [k, val] : args.keyword)
        if (k == field) v = &val;
      if (!v) fail("KeyError: '{}'", field);
    }
    out += v->str();
  }
  return out;
}

Value string_method(const std::string& s, const std::string& name, CallArgs& args) {
  std::string what = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind_args(args, {"chars"}, what);
    return Value(text::strip(s, optional_chars(a[0], what), name != "rstrip", name != "lstrip"));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    bind_args(args, {}, what);
    if (name == "upper") return Value(text::upper(s));
    if (name == "lower") return Value(text::lower(s));
    if (name == "title") return Value(text::title(s));
    if (name == "capitalize") return Value(text::capitalize(s));
    std::u32string u = text::decode(s);
    for (char32_t& c : u) c = text::to_upper(c) != c ? text::to_upper(c) : text::to_lower(c);
    return Value(text::encode(u));
  }
  if (name == "startswith" || name == "endswith") {
    auto a = bind_args(args, {"prefix"}, what);
    for (const auto& p : string_or_tuple(a[0], what)) {
      if (name == "startswith"
              ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
              : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
        return Value(true);
    }
    return Value(false);
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind_args(args, {"sep", "maxsplit"}, what);
    const std::string* sep = optional_chars(a[0], what);
    if (sep && sep->empty()) fail("empty separator");
    int64_t maxsplit = to_int_arg(a[1], -1, what);
    std::vector<std::string> parts;
    if (name == "rsplit" && maxsplit >= 0) {
      // Split from the right: reverse, split with the reversed separator, reverse back.
      std::u32string u = text::decode(s);
      std::u32string rs(u.rbegin(), u.rend());
      std::string rsep;
      if (sep) {
        std::u32string us = text::decode(*sep);
        rsep = text::encode(std::u32string(us.rbegin(), us.rend()));
      }
      for (const auto& p : text::split(text::encode(rs), sep ? &rsep : nullptr, maxsplit)) {
        std::u32string up = text::decode(p);
        parts.insert(parts.begin(), text::encode(std::u32string(up.rbegin(), up.rend())));
      }
    } else {
      parts = text::split(s, sep, maxsplit);
    }
    List out;
    for (auto& p : parts) out.emplace_back(std::move(p));
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    auto a = bind_args(args, {"keepends"}, what);
    bool keep = a[0] && a[0]->truthy();
    List out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        size_t end = i;
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        out.emplace_back(s.substr(start, (keep ? i + 1 : end) - start));
        start = i + 1;
      }
    }
    if (start < s.size()) out.emplace_back(s.substr(start));
    return Value(std::move(out));
  }
  if (name == "replace") {
    auto a = bind_args(args, {"old", "new", "count"}, what);
    if (!a[0] || !a[1] || !a[0]->is_string() || !a[1]->is_string())
      fail("{} expects two strings", what);
    return Value(
        text::replace(s, a[0]->as_string(), a[1]->as_string(), to_int_arg(a[2], -1, what)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto a = bind_args(args, {"sub"}, what);
    if (!a[0] || !a[0]->is_string()) fail("{} expects a string", what);
    const std::string& sub = a[0]->as_string();
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(text::length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    size_t p = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(text::length(std::string_view(s).substr(0, p))));
  }
  if (name == "join") {
    auto a = bind_args(args, {"iterable"}, what);
    if (!a[0]) fail("{} missing required argument", what);
    std::string out;
    bool first = true;
    for (const auto& e : iterate(*a[0])) {
      if (!e.is_string()) fail("sequence item: expected str instance, {} found", e.type_name());
      if (!first) out += s;
      first = false;
      out += e.as_string();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "islower" || name == "isupper") {
    bind_args(args, {}, what);
    std::u32string u = text::decode(s);
    if (u.empty()) return Value(false);
    bool cased = false;
    for (char32_t c : u) {
      bool digit = c >= '0' && c <= '9';
      bool alpha =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && text::is_cased(c));
      if (name == "isdigit" && !digit) return Value(false);
      if (name == "isalpha" && !alpha) return Value(false);
      if (name == "isalnum" && !alpha && !digit) return Value(false);
      if (name == "isspace" && !text::is_space(c)) return Value(false);
      if (name == "islower" && text::to_lower(c) != c) return Value(false);
      if (name == "isupper" && text::to_upper(c) != c) return Value(false);
      cased = cased || text::is_cased(c);
    }
    if (name == "islower" || name == "isupper") return Value(cased);
    return Value(true);
  }
  if (name == "format") return Value(brace_format(s, args));
  fail("unsupported method str.{}()", name);
}

Value dict_method(const Value& obj, const std::string& name, CallArgs& args) {
  std::string what = "dict." + name + "()";
  const Dict& d = obj.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(args, {}, what);
    List out;
    for (const auto& [k, v] : d.entries()) {
      if (name == "items")
        out.push_back(Value::tuple(List{Value(k), v}));
      else if (name == "keys")
        out.emplace_back(k);
      else
        out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (name == "get") {
    auto a = bind_args(args, {"key", "default"}, what);
    if (!a[0]) fail("{} missing required argument 'key'", what);
    if (a[0]->is_string())
      if (const Value* v = d.find(a[0]->as_string())) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  if (name == "copy") {
    bind_args(args, {}, what);
    return obj;
  }
  fail("unsupported method dict.{}()", name);
}

Value list_method(const Value& obj, const std::string& name, CallArgs& args) {
  std::string what = "list." + name + "()";
  const List& l = obj.as_list();
  auto a = bind_args(args, {"value"}, what);
  if (!a[0]) fail("{} missing required argument", what);
  if (name == "count") {
    int64_t n = 0;
    for (const auto& v : l) n += values_equal(v, *a[0]);
    return Value(n);
  }
  for (size_t i = 0; i < l.size(); ++i)
    if (values_equal(l[i], *a[0])) return Value(static_cast<int64_t>(i));
  fail("{} is not in list", a[0]->repr());
}

bool is_string_method(const std::string& n) {
  static constexpr const char* kNames[] = {
      "strip",    "lstrip",     "rstrip",   "upper",   "lower",   "title",      "capitalize",
      "swapcase", "startswith", "endswith", "split",   "rsplit",  "splitlines", "replace",
      "find",     "rfind",      "index",    "rindex",  "count",   "join",       "isdigit",
      "isalpha",  "isalnum",    "isspace",  "islower", "isupper", "format"};
  for (const char* k : kNames)
    if (n == k) return true;
  return false;
}

bool is_mutating(const Value& obj, const std::string& n) {
  if (obj.is_list())
    return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
           n == "clear" || n == "sort" || n == "reverse";
  if (obj.is_dict())
    return n == "update" || n == "pop" || n == "popitem" || n == "setdefault" || n == "clear";
  return false;
}

}  // namespace

std::optional<Value> get_method(const Value& obj, const std::string& name) {
  if (is_mutating(obj, name)) {
    std::string type = obj.is_list() ? "list" : "dict";
    std::string msg = fmt::format(
        "access to attribute '{}' of '{}' object is unsafe (templates cannot modify values)", name,
        type);
    return Value::callable(type + "." + name, [msg](CallArgs&) -> Value { fail("{}", msg); });
  }
  if (obj.is_string() && is_string_method(name)) {
    return Value::callable("str." + name, [obj, name](CallArgs& a) {
      return string_method(obj.as_string(), name, a);
    });
  }
  if (obj.is_dict() &&
      (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy")) {
    return Value::callable("dict." + name,
                           [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
  }
  if (obj.is_list() && (name == "index" || name == "count")) {
    return Value::callable("list." + name,
                           [obj, name](CallArgs& a) { return list_method(obj, name, a); });
  }
  return std::nullopt;
}

}  // namespace pith::jinja
