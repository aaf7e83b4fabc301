// Jinja tests (`x is defined`, `x is not none`, `n is divisibleby(3)`, ...), with Jinja2's
// definitions: strings are iterable sequences, bools are numbers but not integers.
#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "common/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_text.h"

namespace pith::jinja {

namespace {

constexpr std::string_view kTests[] = {
    "defined", "undefined", "none",   "boolean",  "false",    "true",        "integer",
    "float",   "number",    "string", "mapping",  "iterable", "sequence",    "callable",
    "odd",     "even",      "divisibleby", "eq",  "equalto",  "==",          "ne",
    "!=",      "lt",        "lessthan", "<",      "le",       "<=",          "gt",
    "greaterthan", ">",     "ge",     ">=",       "in",       "sameas",      "lower",
    "upper",   "escaped",   "filter", "test"};

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
  if (name == "iterable") return v.kind() == K::List || v.kind() == K::Dict || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.kind() == K::List || v.kind() == K::Dict || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && is_known_filter(v.as_string());
  if (name == "test") return v.is_string() && is_known_test(v.as_string());
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    return name == "lower" ? text::lower(s) == s : text::upper(s) == s;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) fail("{}", v.undefined_hint());
    if (!v.is_int() && !v.is_bool()) fail("test '{}' needs an integer, got {}", name, v.type_name());
    int64_t n = v.as_int();
    if (name == "odd") return n % 2 != 0;
    if (name == "even") return n % 2 == 0;
    const Value& d = required(args, name);
    if (!d.is_int() || d.as_int() == 0) fail("divisibleby needs a non-zero integer");
    return n % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, required(args, name));
  if (name == "ne" || name == "!=") return !values_equal(v, required(args, name));
  if (name == "sameas") return v.same_object(required(args, name));
  if (name == "in") {
    const Value& c = required(args, name);
    if (c.is_string()) return v.is_string() && c.as_string().find(v.as_string()) != std::string::npos;
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
