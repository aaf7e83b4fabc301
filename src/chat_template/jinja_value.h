// pith::jinja::Value: the dynamic value a chat template computes with. It mirrors the Python
// objects Jinja2 sees when Hugging Face renders a template (str, int, float, bool, None, list,
// dict, the Undefined sentinel, namespace() objects and callables), because chat templates are
// written against Python semantics and must render byte for byte as they do there.
//
// Ownership: strings, lists and dicts are immutable and shared (copying a Value is a refcount
// bump), so slicing `messages[1:]` or passing a large message content around costs no copies.
// Only namespace objects are mutable (`{% set ns.x = ... %}`), as in Jinja2's sandbox.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pith::jinja {

class Value;
using List = std::vector<Value>;

// An insertion-ordered str -> Value map (Python dicts keep insertion order, and tojson must
// print keys in that order). Lookups are linear: template dicts are small.
class Dict {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const;  // defined below Value (clang needs Value complete here)

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// Arguments of a call: `f(a, b, key=c)`.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A callable value: a global function (range, namespace, raise_exception, ...), a bound method
// (`d.items`) or a macro. `name` is used in error messages.
struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // Undefined
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(double d) : kind_(Kind::Float), float_(d) {}
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list);
  Value(Dict dict);

  // `hint` is the message Jinja2 would raise when the undefined value is used in a way that
  // needs a real value, e.g. "'dict object' has no attribute 'content'".
  static Value undefined(std::string hint);
  static Value none();
  static Value make_namespace(Dict attrs);
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  // A Python tuple: a List that prints as `(a, b)` (dict.items() pairs, `(1, 2)` literals).
  static Value tuple(List items);

  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is int
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // Int or Bool
  double as_double() const;                // Int, Bool or Float
  const std::string& as_string() const { return *str_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_attrs() const { return *ns_; }  // shared, mutable
  const Callable& as_callable() const { return *fn_; }
  const std::string& undefined_hint() const;

  bool truthy() const;            // Python bool()
  std::string str() const;        // Python str(), what `{{ x }}` prints
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // Jinja2's object description: "dict object", "str object"
  bool same_object(const Value& o) const;  // Python `is`, for the `sameas` test

 private:
  Kind kind_ = Kind::Undefined;
  bool tuple_ = false;  // List that is a Python tuple (repr only)
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;  // String, and Undefined's hint
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Dict> ns_;
  std::shared_ptr<const Callable> fn_;
};

// Truncates a finite double to int64 (Python int(x)); throws when out of range.
int64_t double_to_int(double d);

// Python `==` (numbers across int/float/bool, deep for lists and dicts) and `<` (numbers,
// strings, lists; anything else throws pith::Error like Python's TypeError).
bool values_equal(const Value& a, const Value& b);
bool values_less(const Value& a, const Value& b);

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1.5e+16", "inf", "nan".
std::string format_float(double d);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as HF's tojson filter calls it.
struct JsonFormat {
  bool ensure_ascii = false;
  int indent = -1;             // -1: no newlines
  std::string item_separator;  // default ", " (no indent) or "," (indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonFormat& format);

inline size_t Dict::size() const {
  return entries_.size();
}

}  // namespace pith::jinja
