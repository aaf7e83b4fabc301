// The Jinja built-ins a chat template can call: filters (`x | trim`), tests (`x is defined`),
// methods of str/dict/list values (`s.strip()`, `d.items()`) and global functions (`range`,
// `namespace`, `raise_exception`, `strftime_now`, ...). Each family lives in its own file
// (jinja_filters.cpp, jinja_tests.cpp, jinja_methods.cpp, jinja_globals.cpp, jinja_format.cpp
// for printf-style `%`, shared helpers in jinja_builtins.cpp); this header is their interface.
// Errors are thrown as pith::Error without a line: the interpreter adds the line of the expression
// being evaluated.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/jinja_value.h"

namespace pith::jinja {

bool is_known_filter(std::string_view name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);

bool is_known_test(std::string_view name);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);

// A bound method (`"abc".upper`, `d.items`) as a callable, or nullopt when `obj` has no
// method of that name.
std::optional<Value> get_method(const Value& obj, const std::string& name);

// The global function of that name (range, namespace, dict, raise_exception, strftime_now,
// joiner, cycler), or nullopt.
std::optional<Value> get_global(const std::string& name);

// Binds call arguments to parameter names Python-style (positional first, then keywords);
// throws on unknown keywords, duplicates or too many positionals. `what` names the callee in
// error messages, e.g. "filter 'join'".
std::vector<std::optional<Value>> bind_args(CallArgs& args,
                                            std::initializer_list<const char*> params,
                                            const std::string& what);

// Python printf-style formatting: `format % args` where args is a tuple, a dict (for
// `%(key)s`) or a single value (jinja_format.cpp).
std::string percent_format(const std::string& format, const Value& args);

// Helpers shared by the builtins.
int64_t to_int_arg(const std::optional<Value>& v, int64_t fallback, const std::string& what);
std::string to_string_arg(const std::optional<Value>& v, const std::string& fallback,
                          const std::string& what);
// Python iteration: list items, dict keys, string characters, undefined -> empty.
List iterate(const Value& v);
// Jinja's environment.getattr / getitem: attribute (or key) lookup, undefined when missing.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

}  // namespace pith::jinja
