// Jinja tests (`x is defined`, `x is not none`, `n is divisibleby(3)`, ...), with Jinja2's
// definitions: strings are iterable sequences, bools are numbers but not integers.
#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

constexpr std::string_view kTests[] = {
    "defined",     "undefined", "none",        "boolean", "false",    "true",     "integer",
    "float",       "number",    "string",      "mapping", "iterable", "sequence", "callable",
    "odd",         "even",      "divisibleby", "eq",      "equalto",  "==",       "ne",
    "!=",          "lt",        "lessthan",    "<",       "le",       "<=",       "gt",
    "greaterthan", ">",         "ge",          ">=",      "in",       "sameas",   "lower",
    "upper",       "escaped",   "filter",      "test"};

const Value& required(const CallArgs& a, const std::string& name) {
  if (a.positional.empty()) fail("test '{}' needs an argument", name);
  if (a.positional.size() > 1 || !a.keyword.empty()) fail("test '{}' takes one argument", name);
  return a.positional[0];
}

}  // namespace

bool is_known_test(std::string_view name) {
  for (auto t : kTests)
    if (t == name) return true;
  return false;
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable")
    return v.kind() == K::List || v.kind() == K::Dict || v.is_string() || v.is_undefined();
  if (name == "sequence")  // Jinja2's Undefined defines __len__ and __getitem__
    return v.kind() == K::List || v.kind() == K::Dict || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && is_known_filter(v.as_string());
  if (name == "test") return v.is_string() && is_known_test(v.as_string());
  if (name == "lower" || name == "upper") {
    // Python str(v).islower() / isupper(): some cased character, none of the other case.
    bool cased = false;
    for (char32_t c : text::decode(v.str())) {
      if (name == "lower" ? text::to_lower(c) != c : text::to_upper(c) != c) return false;
      cased = cased || text::is_cased(c);
    }
    return cased;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) fail("{}", v.undefined_hint());
    if (!v.is_number()) fail("test '{}' needs a number, got {}", name, v.type_name());
    const Value divisor = name == "divisibleby" ? required(args, name) : Value(int64_t{2});
    if (!divisor.is_number()) fail("test '{}' needs a number", name);
    if (v.is_float() || divisor.is_float()) {  // Python float %: sign of the divisor
      double d = divisor.as_double();
      if (d == 0) fail("float modulo");
      double r = std::fmod(v.as_double(), d);
      if (r != 0 && ((r < 0) != (d < 0))) r += d;
      return name == "odd" ? r == 1 : r == 0;
    }
    int64_t n = v.as_int(), d = divisor.as_int();
    if (d == 0) fail("integer division or modulo by zero");
    if (d == -1) return name != "odd";
    int64_t r = n % d;
    if (r != 0 && ((r < 0) != (d < 0))) r += d;
    return name == "odd" ? r == 1 : r == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==")
    return values_equal(v, required(args, name));
  if (name == "ne" || name == "!=") return !values_equal(v, required(args, name));
  if (name == "sameas") return v.same_object(required(args, name));
  if (name == "in") {
    const Value& c = required(args, name);
    if (c.is_string())
      return v.is_string() && c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_dict()) return v.is_string() && c.as_dict().find(v.as_string()) != nullptr;
    for (const auto& e : iterate(c))
      if (values_equal(e, v)) return true;
    return false;
  }
  const Value& other = required(args, name);
  if (v.is_undefined()) fail("{}", v.undefined_hint());
  if (name == "lt" || name == "lessthan" || name == "<") return values_less(v, other);
  if (name == "le" || name == "<=") return !values_less(other, v);
  if (name == "gt" || name == "greaterthan" || name == ">") return values_less(other, v);
  if (name == "ge" || name == ">=") return !values_less(v, other);
  fail("unsupported test '{}'", name);
}

}  // namespace pith::jinja
