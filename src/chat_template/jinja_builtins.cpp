// Shared helpers of the Jinja built-ins (see jinja_builtins.h): argument binding, iteration and
// Jinja2's attribute/item lookup rules.
#include "chat_template/jinja_builtins.h"

#include <fmt/format.h>

#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

std::vector<std::optional<Value>> bind_args(CallArgs& args,
                                            std::initializer_list<const char*> params,
                                            const std::string& what) {
  std::vector<const char*> names(params);
  std::vector<std::optional<Value>> out(names.size());
  if (args.positional.size() > names.size())
    fail("{} takes at most {} argument(s), got {}", what, names.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (auto& [k, v] : args.keyword) {
    size_t i = 0;
    while (i < names.size() && k != names[i]) ++i;
    if (i == names.size()) fail("{} got an unexpected keyword argument '{}'", what, k);
    if (out[i]) fail("{} got multiple values for argument '{}'", what, k);
    out[i] = v;
  }
  return out;
}

int64_t to_int_arg(const std::optional<Value>& v, int64_t fallback, const std::string& what) {
  if (!v || v->is_none() || v->is_undefined()) return fallback;
  if (v->is_int() || v->is_bool()) return v->as_int();
  if (v->is_float()) return double_to_int(v->as_double());
  fail("{} expects an integer, got {}", what, v->type_name());
}

std::string to_string_arg(const std::optional<Value>& v, const std::string& fallback,
                          const std::string& what) {
  if (!v || v->is_undefined()) return fallback;
  if (!v->is_string()) fail("{} expects a string, got {}", what, v->type_name());
  return v->as_string();
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List:
      return v.as_list();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, _] : v.as_dict().entries()) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      const std::string& s = v.as_string();
      if (text::is_ascii(s)) {
        for (char c : s) chars.emplace_back(std::string(1, c));
      } else {
        for (char32_t c : text::decode(s)) {
          std::string one;
          text::append_utf8(one, c);
          chars.emplace_back(std::move(one));
        }
      }
      return chars;
    }
    case Value::Kind::Undefined:
      return {};
    default:
      fail("'{}' is not iterable", v.type_name());
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined:
      fail("{}",
           obj.undefined_hint().empty() ? std::string("undefined value") : obj.undefined_hint());
    case Value::Kind::Namespace:
      if (const Value* v = obj.namespace_attrs().find(name)) return *v;
      break;
    case Value::Kind::Dict:
      if (auto m = get_method(obj, name)) return *m;
      if (const Value* v = obj.as_dict().find(name)) return *v;
      break;
    case Value::Kind::None:
      return Value::undefined(fmt::format("'None' has no attribute '{}'", name));
    default:
      if (auto m = get_method(obj, name)) return *m;
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", obj.type_name(), name));
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined:
      fail("{}",
           obj.undefined_hint().empty() ? std::string("undefined value") : obj.undefined_hint());
    case Value::Kind::Dict:
      if (key.is_string()) {
        if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
        if (auto m = get_method(obj, key.as_string())) return *m;
      }
      break;
    case Value::Kind::List:
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int(), n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
      }
      break;
    case Value::Kind::String:
      if (key.is_int() || key.is_bool()) {
        const std::string& s = obj.as_string();
        int64_t i = key.as_int();
        if (text::is_ascii(s)) {
          int64_t n = static_cast<int64_t>(s.size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return Value(std::string(1, s[static_cast<size_t>(i)]));
        } else {
          std::u32string u = text::decode(s);
          int64_t n = static_cast<int64_t>(u.size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return Value(text::encode(u.substr(static_cast<size_t>(i), 1)));
        }
      }
      break;
    case Value::Kind::Namespace:
      if (key.is_string()) return get_attr(obj, key.as_string());
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(fmt::format("{} has no element {}", obj.type_name(), key.repr()));
}

}  // namespace pith::jinja
