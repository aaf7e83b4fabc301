// Jinja filters (`x | trim`, `xs | selectattr('role', 'equalto', 'user') | list`, ...), with
// Jinja2's semantics, and `tojson` as Hugging Face overrides it: json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False), so non-ASCII text and
// HTML characters pass through unescaped.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

constexpr std::string_view kFilters[] = {
    "abs",    "attr",       "capitalize", "count",     "d",       "default", "dictsort",
    "e",      "escape",     "first",      "float",     "indent",  "int",     "items",
    "join",   "last",       "length",     "list",      "lower",   "map",     "max",
    "min",    "reject",     "rejectattr", "replace",   "reverse", "round",   "safe",
    "select", "selectattr", "sort",       "string",    "sum",     "title",   "tojson",
    "trim",   "unique",     "upper",      "wordcount", "center",  "batch",   "forceescape",
    "format"};

std::string what_of(const std::string& name) {
  return "filter '" + name + "'";
}

// Jinja's make_attrgetter: "a.b.0" walks attributes / items.
Value attribute_of(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int64_t index = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    bool numeric =
        !part.empty() && ec == std::errc() && end == part.data() + part.size() && part[0] != '-';
    cur = numeric ? get_item(cur, Value(index)) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string attribute_path(const std::optional<Value>& v, const std::string& what) {
  if (!v || v->is_none()) return "";
  if (v->is_int()) return std::to_string(v->as_int());
  if (!v->is_string()) fail("{}: attribute must be a string", what);
  return v->as_string();
}

// select/reject/selectattr/rejectattr: args are (attribute?, test name?, test args...).
Value select(const std::string& name, const Value& input, CallArgs& args) {
  bool by_attr = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  std::vector<Value> pos = args.positional;
  if (!args.keyword.empty()) fail("{} takes no keyword arguments", what_of(name));
  std::string attr;
  if (by_attr) {
    if (pos.empty() || !pos[0].is_string()) fail("{} needs an attribute name", what_of(name));
    attr = pos[0].as_string();
    pos.erase(pos.begin());
  }
  std::string test;
  if (!pos.empty()) {
    if (!pos[0].is_string()) fail("{}: test name must be a string", what_of(name));
    test = pos[0].as_string();
    if (!is_known_test(test)) fail("{}: unsupported test '{}'", what_of(name), test);
    pos.erase(pos.begin());
  }
  List out;
  for (const auto& item : iterate(input)) {
    Value v = by_attr ? attribute_of(item, attr) : item;
    bool ok;
    if (test.empty()) {
      ok = v.truthy();
    } else {
      CallArgs targs;
      targs.positional = pos;
      ok = apply_test(test, v, targs);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value(std::move(out));
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(text::lower(v.as_string()));
  return v;
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value to_int(const Value& v, const Value& dflt, int base) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (!std::isfinite(d) || d >= 9.2e18 || d <= -9.2e18) return dflt;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = text::strip(v.as_string(), nullptr, true, true);
    std::string digits;
    for (char c : s)
      if (c != '_') digits.push_back(c);
    if (digits.empty()) return dflt;
    char* end = nullptr;
    errno = 0;
    long long r = std::strtoll(digits.c_str(), &end, base);
    if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(r));
    double d = std::strtod(digits.c_str(), &end);  // Jinja falls back to int(float(s))
    if (*end == '\0' && std::isfinite(d) && d < 9.2e18 && d > -9.2e18)
      return Value(static_cast<int64_t>(d));
    return dflt;
  }
  return dflt;
}

Value to_float(const Value& v, const Value& dflt) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = text::strip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return dflt;
}

Value tojson(const Value& input, CallArgs& args) {
  auto a =
      bind_args(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "filter 'tojson'");
  JsonFormat f;
  f.ensure_ascii = a[0] && a[0]->truthy();
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) fail("filter 'tojson': string indent is not supported");
    f.indent = static_cast<int>(std::max<int64_t>(0, to_int_arg(a[1], 0, "filter 'tojson'")));
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_list() || a[2]->as_list().size() != 2 || !a[2]->as_list()[0].is_string() ||
        !a[2]->as_list()[1].is_string())
      fail("filter 'tojson': separators must be a pair of strings");
    f.item_separator = a[2]->as_list()[0].as_string();
    f.key_separator = a[2]->as_list()[1].as_string();
    if (f.item_separator.empty()) f.item_separator = std::string("\0", 1);
  }
  f.sort_keys = a[3] && a[3]->truthy();
  std::string out = to_json(input, f);
  if (f.item_separator == std::string("\0", 1)) {
    // An empty item separator was requested; to_json treats empty as "default", so a NUL
    // placeholder went in. Strings never contain raw NUL after JSON escaping.
    out.erase(std::remove(out.begin(), out.end(), '\0'), out.end());
  }
  return Value(std::move(out));
}

}  // namespace

bool is_known_filter(std::string_view name) {
  for (auto f : kFilters)
    if (f == name) return true;
  return false;
}

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  const std::string what = what_of(name);
  if (name == "tojson") return tojson(input, args);
  if (name == "default" || name == "d") {
    auto a = bind_args(args, {"default_value", "boolean"}, what);
    bool boolean = a[1] && a[1]->truthy();
    if (input.is_undefined() || (boolean && !input.truthy())) return a[0] ? *a[0] : Value("");
    return input;
  }
  if (name == "safe") return input;
  if (name == "format") {
    if (!args.positional.empty() && !args.keyword.empty())
      fail("{}: can't handle positional and keyword arguments at the same time", what);
    Dict kw;
    for (auto& [k, v] : args.keyword) kw.set(k, v);
    return Value(percent_format(
        input.str(), args.keyword.empty() ? Value::tuple(args.positional) : Value(std::move(kw))));
  }
  if (name == "string") {
    bind_args(args, {}, what);
    return input.is_string() ? input : Value(input.str());
  }
  if (name == "length" || name == "count") {
    bind_args(args, {}, what);
    switch (input.kind()) {
      case Value::Kind::String:
        return Value(static_cast<int64_t>(text::length(input.as_string())));
      case Value::Kind::List:
        return Value(static_cast<int64_t>(input.as_list().size()));
      case Value::Kind::Dict:
        return Value(static_cast<int64_t>(input.as_dict().size()));
      case Value::Kind::Undefined:
        return Value(int64_t{0});
      default:
        fail("object of type '{}' has no len()", input.type_name());
    }
  }
  if (name == "trim") {
    auto a = bind_args(args, {"chars"}, what);
    const std::string* chars = a[0] && a[0]->is_string() ? &a[0]->as_string() : nullptr;
    return Value(text::strip(input.str(), chars, true, true));
  }
  if (name == "upper") return Value(text::upper(input.str()));
  if (name == "lower") return Value(text::lower(input.str()));
  if (name == "title") {
    // Jinja's do_title, not Python's str.title: a word starts after whitespace, '-', '(',
    // '{', '[' or '<' only, so "they're" stays "They're".
    std::u32string u = text::decode(input.str());
    bool start = true;
    for (char32_t& c : u) {
      bool sep = text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        start = true;
        continue;
      }
      c = start ? text::to_upper(c) : text::to_lower(c);
      start = false;
    }
    return Value(text::encode(u));
  }
  if (name == "capitalize") return Value(text::capitalize(input.str()));
  if (name == "replace") {
    auto a = bind_args(args, {"old", "new", "count"}, what);
    if (!a[0] || !a[1]) fail("{} needs old and new strings", what);
    return Value(text::replace(input.str(), a[0]->str(), a[1]->str(), to_int_arg(a[2], -1, what)));
  }
  if (name == "e" || name == "escape" || name == "forceescape")
    return Value(escape_html(input.str()));
  if (name == "join") {
    auto a = bind_args(args, {"d", "attribute"}, what);
    std::string sep = a[0] ? a[0]->str() : "";
    std::string attr = attribute_path(a[1], what);
    std::string out;
    bool first = true;
    for (const auto& item : iterate(input)) {
      if (!first) out += sep;
      first = false;
      out += (attr.empty() ? item : attribute_of(item, attr)).str();
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    bind_args(args, {}, what);
    List items = iterate(input);
    if (items.empty())
      return Value::undefined(fmt::format("No {} item, sequence was empty.", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    bind_args(args, {}, what);
    return Value(iterate(input));
  }
  if (name == "items") {
    bind_args(args, {}, what);
    if (input.is_undefined()) return Value(List{});
    if (!input.is_dict()) fail("{}: can only get item pairs from a mapping", what);
    List out;
    for (const auto& [k, v] : input.as_dict().entries())
      out.push_back(Value::tuple(List{Value(k), v}));
    return Value(std::move(out));
  }
  if (name == "reverse") {
    bind_args(args, {}, what);
    if (input.is_string()) {
      std::u32string u = text::decode(input.as_string());
      std::reverse(u.begin(), u.end());
      return Value(text::encode(u));
    }
    List items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if ((name == "int" || name == "float") && input.is_undefined())
    fail("{}", input.undefined_hint());
  if (name == "int") {
    auto a = bind_args(args, {"default", "base"}, what);
    return to_int(input, a[0] ? *a[0] : Value(int64_t{0}),
                  static_cast<int>(to_int_arg(a[1], 10, what)));
  }
  if (name == "float") {
    auto a = bind_args(args, {"default"}, what);
    return to_float(input, a[0] ? *a[0] : Value(0.0));
  }
  if (name == "abs") {
    bind_args(args, {}, what);
    if (input.is_float()) return Value(std::fabs(input.as_double()));
    if (input.is_int() || input.is_bool()) {
      if (input.as_int() == INT64_MIN) fail("integer overflow");
      return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
    }
    fail("bad operand type for abs(): '{}'", input.type_name());
  }
  if (name == "round") {
    auto a = bind_args(args, {"precision", "method"}, what);
    int64_t precision = to_int_arg(a[0], 0, what);
    std::string method = to_string_arg(a[1], "common", what);
    if (input.is_undefined()) fail("{}", input.undefined_hint());
    if (!input.is_number()) fail("{} needs a number", what);
    if (method == "common" && !input.is_float() && precision >= 0)
      return Value(input.as_int());  // round(int) is an int
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = input.as_double() * scale;
    double r = method == "common"  ? std::nearbyint(x)  // Python round(): half to even
               : method == "ceil"  ? std::ceil(x)
               : method == "floor" ? std::floor(x)
                                   : (fail("{}: method must be common, ceil or floor", what), 0.0);
    return Value(r / scale);
  }
  if (name == "map") {
    List items = iterate(input);
    List out;
    bool by_attr = false;
    for (const auto& [k, _] : args.keyword) by_attr = by_attr || k == "attribute";
    if (by_attr) {
      auto a = bind_args(args, {"attribute", "default"}, what);
      std::string attr = attribute_path(a[0], what);
      for (const auto& item : items) {
        Value v = attribute_of(item, attr);
        out.push_back(v.is_undefined() && a[1] ? *a[1] : v);
      }
      return Value(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string())
      fail("{} needs a filter name or attribute=", what);
    std::string filter = args.positional[0].as_string();
    if (!is_known_filter(filter)) fail("{}: unsupported filter '{}'", what, filter);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const auto& item : items) {
      CallArgs copy = rest;
      out.push_back(apply_filter(filter, item, copy));
    }
    return Value(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select(name, input, args);
  if (name == "attr") {
    auto a = bind_args(args, {"name"}, what);
    return get_attr(input, to_string_arg(a[0], "", what));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    bool is_sort = name == "sort";
    auto a = is_sort ? bind_args(args, {"reverse", "case_sensitive", "attribute"}, what)
                     : bind_args(args, {"case_sensitive", "attribute"}, what);
    bool reverse = is_sort && a[0] && a[0]->truthy();
    bool case_sensitive = a[is_sort ? 1 : 0] && a[is_sort ? 1 : 0]->truthy();
    std::string attr = attribute_path(a[is_sort ? 2 : 1], what);
    auto key = [&](const Value& v) {
      return sort_key(attr.empty() ? v : attribute_of(v, attr), case_sensitive);
    };
    List items = iterate(input);
    if (name == "unique") {
      List out, keys;
      for (const auto& item : items) {
        Value k = key(item);
        if (std::none_of(keys.begin(), keys.end(),
                         [&](const Value& x) { return values_equal(x, k); })) {
          keys.push_back(k);
          out.push_back(item);
        }
      }
      return Value(std::move(out));
    }
    if (!is_sort) {
      if (items.empty())
        return Value::undefined(fmt::format("No {} item, sequence was empty.", name));
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        bool better = name == "min" ? values_less(key(items[i]), key(items[best]))
                                    : values_less(key(items[best]), key(items[i]));
        if (better) best = i;
      }
      return items[best];
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? values_less(key(y), key(x)) : values_less(key(x), key(y));
    });
    return Value(std::move(items));
  }
  if (name == "dictsort") {
    auto a = bind_args(args, {"case_sensitive", "by", "reverse"}, what);
    if (!input.is_dict()) fail("{} needs a mapping", what);
    bool case_sensitive = a[0] && a[0]->truthy();
    std::string by = to_string_arg(a[1], "key", what);
    bool reverse = a[2] && a[2]->truthy();
    List items;
    for (const auto& [k, v] : input.as_dict().entries())
      items.push_back(Value::tuple(List{Value(k), v}));
    size_t idx = by == "value" ? 1 : 0;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      Value kx = sort_key(x.as_list()[idx], case_sensitive),
            ky = sort_key(y.as_list()[idx], case_sensitive);
      return reverse ? values_less(ky, kx) : values_less(kx, ky);
    });
    return Value(std::move(items));
  }
  if (name == "sum") {
    auto a = bind_args(args, {"attribute", "start"}, what);
    std::string attr = attribute_path(a[0], what);
    Value total = a[1] ? *a[1] : Value(int64_t{0});
    for (const auto& item : iterate(input)) {
      Value v = attr.empty() ? item : attribute_of(item, attr);
      if (!v.is_number() || !total.is_number()) fail("{}: unsupported operand types", what);
      total = (v.is_float() || total.is_float()) ? Value(total.as_double() + v.as_double())
                                                 : Value(total.as_int() + v.as_int());
    }
    return total;
  }
  if (name == "indent") {
    auto a = bind_args(args, {"width", "first", "blank"}, what);
    std::string pad =
        a[0] && a[0]->is_string()
            ? a[0]->as_string()
            : std::string(static_cast<size_t>(std::max<int64_t>(0, to_int_arg(a[0], 4, what))),
                          ' ');
    bool first = a[1] && a[1]->truthy();
    bool blank = a[2] && a[2]->truthy();
    if (input.is_undefined()) fail("{}", input.undefined_hint());
    if (!input.is_string()) fail("{} needs a string, got {}", what, input.type_name());
    std::string s = input.str();
    std::string out;
    size_t start = 0;
    bool is_first = true;
    while (true) {
      size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      bool indent_it =
          is_first ? first : (blank || !text::strip(line, nullptr, true, true).empty());
      if (indent_it) out += pad;
      out += line;
      if (nl == std::string::npos) break;
      out += "\n";
      start = nl + 1;
      is_first = false;
    }
    return Value(std::move(out));
  }
  if (name == "wordcount") {
    bind_args(args, {}, what);
    // Jinja counts `\w+` runs: letters, digits and '_' (any non-ASCII, non-space code point
    // counts as a word character here).
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : text::decode(input.str())) {
      bool w = (c < 0x80) ? (std::isalnum(static_cast<int>(c)) || c == '_') : !text::is_space(c);
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value(words);
  }
  if (name == "center") {
    auto a = bind_args(args, {"width"}, what);
    std::string s = input.str();
    int64_t width = to_int_arg(a[0], 80, what), len = static_cast<int64_t>(text::length(s));
    if (width <= len) return Value(s);
    int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "batch") {
    auto a = bind_args(args, {"linecount", "fill_with"}, what);
    int64_t n = to_int_arg(a[0], 1, what);
    if (n <= 0) fail("{} needs a positive count", what);
    List out, cur;
    for (const auto& item : iterate(input)) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == n) {
        out.emplace_back(std::move(cur));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (a[1])
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*a[1]);
      out.emplace_back(std::move(cur));
    }
    return Value(std::move(out));
  }
  fail("unsupported filter '{}'", name);
}

}  // namespace pith::jinja
