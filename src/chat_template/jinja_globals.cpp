// Global functions available to chat templates: Jinja2's defaults (range, dict, namespace,
// joiner, cycler) plus the two Hugging Face adds (raise_exception, strftime_now).
#include <fmt/format.h>

#include <ctime>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_exception.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja2's sandbox limit

Value range(CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const auto& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) fail("range() expects integers, got {}", v.type_name());
    n.push_back(v.as_int());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (n.size() == 1)
    stop = n[0];
  else if (n.size() == 2 || n.size() == 3) {
    start = n[0];
    stop = n[1];
    if (n.size() == 3) step = n[2];
  } else {
    fail("range expected 1 to 3 arguments, got {}", n.size());
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange)
      fail("range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
    out.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return Value(std::move(out));
}

Dict dict_from_args(CallArgs& args, const char* what) {
  Dict d;
  if (args.positional.size() > 1) fail("{}() takes at most 1 positional argument", what);
  if (args.positional.size() == 1) {
    const Value& init = args.positional[0];
    if (init.is_dict()) {
      for (const auto& [k, v] : init.as_dict().entries()) d.set(k, v);
    } else if (init.is_namespace()) {
      for (const auto& [k, v] : init.namespace_attrs().entries()) d.set(k, v);
    } else {
      fail("{}() argument must be a mapping, got {}", what, init.type_name());
    }
  }
  for (auto& [k, v] : args.keyword) d.set(k, v);
  return d;
}

Value strftime_now(CallArgs& args) {
  auto a = bind_args(args, {"format"}, "strftime_now()");
  std::string format = to_string_arg(a[0], "", "strftime_now()");
  if (!a[0]) fail("strftime_now() missing required argument 'format'");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
  if (n == 0 && !format.empty()) fail("strftime_now(): format too long or invalid");
  return Value(std::string(buf, n));
}

}  // namespace

std::optional<Value> get_global(const std::string& name) {
  if (name == "range") return Value::callable(name, range);
  if (name == "dict")
    return Value::callable(name, [](CallArgs& a) { return Value(dict_from_args(a, "dict")); });
  if (name == "namespace")
    return Value::callable(
        name, [](CallArgs& a) { return Value::make_namespace(dict_from_args(a, "namespace")); });
  if (name == "raise_exception") {
    return Value::callable(name, [](CallArgs& a) -> Value {
      auto b = bind_args(a, {"message"}, "raise_exception()");
      throw TemplateException(b[0] ? b[0]->str() : std::string());
    });
  }
  if (name == "strftime_now") return Value::callable(name, strftime_now);
  if (name == "joiner") {
    return Value::callable(name, [](CallArgs& a) {
      auto b = bind_args(a, {"sep"}, "joiner()");
      std::string sep = to_string_arg(b[0], ", ", "joiner()");
      auto used = std::make_shared<bool>(false);
      return Value::callable("joiner", [sep, used](CallArgs&) {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(sep);
      });
    });
  }
  if (name == "cycler") {
    return Value::callable(name, [](CallArgs& a) {
      if (a.positional.empty()) fail("cycler() needs at least one item");
      Dict attrs;
      List items = a.positional;
      auto pos = std::make_shared<size_t>(0);
      attrs.set("next", Value::callable("cycler.next", [items, pos](CallArgs&) {
                  Value v = items[*pos];
                  *pos = (*pos + 1) % items.size();
                  return v;
                }));
      attrs.set("reset", Value::callable("cycler.reset", [pos](CallArgs&) {
                  *pos = 0;
                  return Value::none();
                }));
      return Value::make_namespace(std::move(attrs));
    });
  }
  return std::nullopt;
}

}  // namespace pith::jinja
