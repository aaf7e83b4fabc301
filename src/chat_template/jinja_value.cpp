// pith::jinja::Value: Python object semantics for chat templates (see jinja_value.h).
#include "chat_template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

// ---- Dict ----

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

// ---- construction ----

Value::Value(std::string s)
    : kind_(Kind::String), str_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List list) : kind_(Kind::List), list_(std::make_shared<const List>(std::move(list))) {}
Value::Value(Dict dict) : kind_(Kind::Dict), dict_(std::make_shared<const Dict>(std::move(dict))) {}

Value Value::undefined(std::string hint) {
  Value v;
  v.str_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.ns_ = std::make_shared<Dict>(std::move(attrs));
  return v;
}

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

namespace {

template <typename Json>
Value value_from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List list;
      list.reserve(j.size());
      for (const auto& e : j) list.push_back(value_from_json(e));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), value_from_json(it.value()));
      return Value(std::move(d));
    }
    default:
      fail("chat template: unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) {
  return value_from_json(j);
}
Value Value::from_json(const nlohmann::ordered_json& j) {
  return value_from_json(j);
}

// ---- accessors ----

double Value::as_double() const {
  return kind_ == Kind::Float ? float_ : static_cast<double>(int_);
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return str_ ? *str_ : kEmpty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return int_ != 0;
    case Kind::Float:
      return float_ != 0.0;
    case Kind::String:
      return !str_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return dict_->size() != 0;
    case Kind::Namespace:
    case Kind::Callable:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType object";
    case Kind::Bool:
      return "bool object";
    case Kind::Int:
      return "int object";
    case Kind::Float:
      return "float object";
    case Kind::String:
      return "str object";
    case Kind::List:
      return "list object";
    case Kind::Dict:
      return "dict object";
    case Kind::Namespace:
      return "Namespace object";
    case Kind::Callable:
      return "function object";
  }
  return "object";
}

bool Value::same_object(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::Bool:
    case Kind::Int:
      return int_ == o.int_;
    case Kind::Float:
      return float_ == o.float_;
    case Kind::String:
      return str_ == o.str_ || *str_ == *o.str_;
    case Kind::List:
      return list_ == o.list_;
    case Kind::Dict:
      return dict_ == o.dict_;
    case Kind::Namespace:
      return ns_ == o.ns_;
    case Kind::Callable:
      return fn_ == o.fn_;
  }
  return false;
}

// ---- Python str() / repr() ----

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  size_t epos = sci.find('e');
  std::string mant = sci.substr(neg ? 1 : 0, epos - (neg ? 1 : 0));
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out;
  if (neg) out.push_back('-');
  if (exp < -4 || exp >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out.append(ebuf);
  } else if (exp < 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-exp - 1), '0');
    out.append(digits);
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out.append(digits);
      out.append(int_len - digits.size(), '0');
      out.append(".0");
    } else {
      out.append(digits, 0, int_len);
      out.push_back('.');
      out.append(digits, int_len, std::string::npos);
    }
  }
  return out;
}

namespace {

std::string repr_string(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string Value::repr() const {
  switch (kind_) {
    case Kind::String:
      return repr_string(*str_);
    case Kind::List: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries()) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Undefined:
      return "Undefined";
    default:
      return str();
  }
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return int_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(int_);
    case Kind::Float:
      return format_float(float_);
    case Kind::String:
      return *str_;
    case Kind::List:
    case Kind::Dict:
      return repr();
    case Kind::Namespace:
      return "<Namespace>";
    case Kind::Callable:
      return "<function " + fn_->name + ">";
  }
  return "";
}

int64_t double_to_int(double d) {
  if (!std::isfinite(d)) fail("cannot convert float {} to integer", format_float(d));
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    fail("integer out of range: {}", format_float(d));
  return static_cast<int64_t>(d);
}

// ---- comparisons ----

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* w = y.find(k);
        if (!w || !values_equal(v, *w)) return false;
      }
      return true;
    }
    default:
      return a.same_object(b);
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_less(x[i], y[i])) return true;
      if (values_less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between {} and {}", a.type_name(), b.type_name());
}

// ---- json.dumps ----

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  auto hex4 = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", v);
    out += buf;
  };
  if (ensure_ascii && !text::is_ascii(s)) {
    for (char32_t c : text::decode(s)) {
      if (c >= 0x80) {
        if (c >= 0x10000) {
          c -= 0x10000;
          hex4(0xD800 + (c >> 10));
          hex4(0xDC00 + (c & 0x3FF));
        } else {
          hex4(c);
        }
      } else {
        std::string one(1, static_cast<char>(c));
        std::string tmp;
        json_string(tmp, one, false);
        out.append(tmp, 1, tmp.size() - 2);
      }
    }
    out.push_back('"');
    return;
  }
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20)
          hex4(c);
        else
          out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

void json_value(std::string& out, const Value& v, const JsonFormat& f, int depth) {
  auto newline = [&](int d) {
    if (f.indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(f.indent) * d, ' ');
  };
  const std::string& item_sep = f.item_separator.empty()
                                    ? (f.indent < 0 ? std::string(", ") : std::string(","))
                                    : f.item_separator;
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += format_float(d);
      return;
    }
    case Value::Kind::String:
      json_string(out, v.as_string(), f.ensure_ascii);
      return;
    case Value::Kind::List: {
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value(out, l[i], f, depth + 1);
      }
      newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      const Dict& d = v.is_dict() ? v.as_dict() : v.namespace_attrs();
      if (d.size() == 0) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& e : d.entries()) items.push_back(&e);
      if (f.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, items[i]->first, f.ensure_ascii);
        out += f.key_separator;
        json_value(out, items[i]->second, f, depth + 1);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
    case Value::Kind::Undefined:
      fail("Object of type Undefined is not JSON serializable");
    case Value::Kind::Callable:
      fail("Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonFormat& format) {
  std::string out;
  json_value(out, v, format, 0);
  return out;
}

}  // namespace pith::jinja
