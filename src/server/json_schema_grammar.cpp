// JSON Schema -> GBNF (see json_schema_grammar.h for the supported subset).
//
// Every schema becomes a list of GBNF alternatives; objects, arrays, enums, unions and $ref
// targets get named rules (named after where they sit: schema-address-street, def-Node), plain
// types reuse shared rules (string, integer, ...). Values carry no whitespace of their own: the
// structure around them puts `ws` after every value and after `{`, `[`, `,` and `:`, so two
// `ws` never meet and every gap between tokens is exactly one bounded `ws`.
#include "server/json_schema_grammar.h"

#include <pith/grammar.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/error.h"
#include "server/json_schema_pattern.h"
#include "server/json_schema_rules.h"
#include "server/json_schema_scalars.h"

namespace pith::server {
namespace {

using Json = nlohmann::ordered_json;
using Alternatives = std::vector<std::string>;
using json_schema_rules::join;
using json_schema_rules::kShared;
using json_schema_rules::literal;
using json_schema_rules::name_part;
using json_schema_rules::repeated;
using json_schema_rules::seq;
using json_schema_rules::SharedRule;

constexpr const char* kWhere = "response_format.json_schema.schema";
constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxCount = 1000;  // the GBNF parser's largest {m,n} bound

const std::set<std::string> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema",       "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "discriminator",
};
const std::set<std::string> kObjectKeywords = {
    "properties",    "required",      "additionalProperties", "propertyNames",
    "minProperties", "maxProperties", "patternProperties"};
const std::set<std::string> kArrayKeywords = {"items",    "prefixItems", "additionalItems",
                                              "minItems", "maxItems",    "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "format", "pattern"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum",
                                               "exclusiveMaximum", "multipleOf"};
const std::set<std::string> kOtherKeywords = {"type",  "enum",  "const", "$ref",       "anyOf",
                                              "oneOf", "allOf", "$defs", "definitions"};
const char* const kTypeNames[] = {"object",  "array",   "string", "number",
                                  "integer", "boolean", "null"};

std::string pointer_text(const std::string& path) {
  return path.empty() ? "(root)" : path;
}

// One JSON pointer step (RFC 6901 escapes).
std::string child(const std::string& path, const std::string& key) {
  std::string out = path + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

[[noreturn]] void unsupported(const std::string& keyword, const std::string& path,
                              const std::string& detail = "") {
  fail("{}: keyword '{}' at {} is not supported{}", kWhere, keyword, pointer_text(path), detail);
}
[[noreturn]] void malformed(const std::string& keyword, const std::string& path,
                            const std::string& why) {
  fail("{}: keyword '{}' at {} {}", kWhere, keyword, pointer_text(path), why);
}

// Compact JSON text of a value (throws pith::Error for strings that are not UTF-8).
std::string compact(const Json& v, const std::string& path) {
  try {
    return v.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const nlohmann::json::exception&) {
    fail("{}: a string at {} is not valid UTF-8", kWhere, pointer_text(path));
  }
}

class Converter {
 public:
  Converter(const Json& root, ValueSyntax syntax)
      : root_(root), gemma_(syntax == ValueSyntax::Gemma4) {
    for (const SharedRule& r : kShared) taken_.insert(r.name);
    taken_.insert("root");
  }

  std::string run() {
    const std::string top = ref_rule("#", "");
    std::string out = fmt::format("root ::= ws {} ws\n", top);
    use("ws");
    for (const auto& [name, body] : rules_) out += fmt::format("{} ::= {}\n", name, body);
    for (const SharedRule& r : kShared)
      if (used_.count(r.name)) out += fmt::format("{} ::= {}\n", r.name, r.body);
    return out;
  }

 private:
  // ---- rules -------------------------------------------------------------------------------

  std::string fresh(const std::string& hint) {
    std::string name = hint;
    for (int i = 2; taken_.count(name); ++i) name = fmt::format("{}-{}", hint, i);
    taken_.insert(name);
    return name;
  }
  std::string define(const std::string& name, const Alternatives& alts) {
    rules_.emplace_back(name, join(alts, " | "));
    return name;
  }
  bool defined(const std::string& name) const {
    for (const auto& r : rules_)
      if (r.first == name) return true;
    return false;
  }
  std::string use(const std::string& json_name) {
    // Gemma 4 syntax: its own strings, keys and free-form values.
    std::string shared = json_name;
    if (gemma_ && (json_name == "string" || json_name == "char" || json_name == "any-value"))
      shared = "gemma-" + json_name;
    if (used_.insert(shared).second)
      for (const SharedRule& r : kShared)
        if (shared == r.name)
          for (const char* n : r.needs) use(n);
    return shared;
  }
  // One GBNF atom for the alternatives (a named rule when there are several).
  std::string atom(const Alternatives& alts, const std::string& hint) {
    if (alts.size() == 1) return alts[0];
    return define(fresh(hint), alts);
  }

  // The rule of a $ref target, made once per pointer (so recursion refers back to it).
  std::string ref_rule(const std::string& ref, const std::string& path) {
    auto known = ref_names_.find(ref);
    if (known != ref_names_.end()) return known->second;
    if (ref.empty() || ref[0] != '#')
      unsupported("$ref", path, fmt::format(" ('{}': only local references '#/...')", ref));
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      malformed("$ref", path,
                fmt::format("'{}' does not resolve to a schema in this document", ref));
    }
    const std::string where = ref.substr(1);
    const std::string name = ref == "#"
                                 ? fresh("schema")
                                 : fresh("def-" + name_part(where.substr(where.rfind('/') + 1)));
    ref_names_.emplace(ref, name);
    const Alternatives alts = schema(*target, where, name, name);
    if (!(alts.size() == 1 && alts[0] == name && defined(name))) define(name, alts);
    return name;
  }

  // ---- schemas -----------------------------------------------------------------------------

  // The alternatives matching the instances of s (s at JSON pointer `path`). `own`: a name
  // reserved for s (a $ref target) that an object or array rule takes instead of a fresh one.
  Alternatives schema(const Json& s, const std::string& path, const std::string& hint,
                      const std::string& own = "") {
    if (s.is_boolean()) {
      if (s.get<bool>()) return {use("any-value")};
      fail("{}: the schema at {} is false: no value satisfies it", kWhere, pointer_text(path));
    }
    if (!s.is_object())
      fail("{}: the schema at {} must be an object or a boolean", kWhere, pointer_text(path));
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key) || kOtherKeywords.count(key) || kObjectKeywords.count(key) ||
          kArrayKeywords.count(key) || kStringKeywords.count(key) || kNumberKeywords.count(key))
        continue;
      unsupported(key, path);
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != Json(false))
      unsupported("uniqueItems", path, " (only uniqueItems: false)");
    for (const char* defs : {"$defs", "definitions"})
      if (s.contains(defs) && !s[defs].is_object()) malformed(defs, path, "must be an object");

    // Keywords that replace the rest of the schema allow only annotations beside them.
    for (const char* applicator : {"$ref", "allOf", "anyOf", "oneOf", "enum", "const"}) {
      if (!s.contains(applicator)) continue;
      for (const auto& [key, value] : s.items()) {
        if (key == applicator || kAnnotations.count(key) || key == "$defs" || key == "definitions")
          continue;
        const bool typed_values =
            applicator == std::string("enum") || applicator == std::string("const");
        if (typed_values && key == "type") continue;  // filters the values
        unsupported(key, path, fmt::format(" beside '{}'", applicator));
      }
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) malformed("$ref", path, "must be a string");
      return {ref_rule(s["$ref"].get<std::string>(), path)};
    }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.empty()) malformed("allOf", path, "must be a non-empty array");
      if (all.size() > 1) unsupported("allOf", path, " with more than one schema");
      return schema(all[0], child(path, "allOf") + "/0", hint, own);
    }
    for (const char* union_kw : {"anyOf", "oneOf"})
      if (s.contains(union_kw)) return any_of(s[union_kw], union_kw, path, hint);
    if (s.contains("enum") || s.contains("const")) return values(s, path);

    std::set<std::string> types = type_set(s, path);
    if (types.empty()) return {use("any-value")};
    if (types.count("number")) types.erase("integer");  // number already covers integers
    auto rule_name = [&] { return types.size() == 1 && !own.empty() ? own : fresh(hint); };
    Alternatives alts;
    for (const char* t : kTypeNames) {
      if (!types.count(t)) continue;
      const std::string type = t;
      if (type == "object") {
        alts.push_back(object(s, path, rule_name()));
      } else if (type == "array") {
        alts.push_back(array(s, path, rule_name()));
      } else if (type == "string") {
        alts.push_back(string(s, path));
      } else {
        alts.push_back(number(s, path, type, hint));
      }
    }
    return alts;
  }

  std::set<std::string> type_set(const Json& s, const std::string& path) {
    std::set<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      Json list = t.is_array() ? t : Json::array({t});
      if (list.empty()) malformed("type", path, "must name at least one type");
      for (const Json& name : list) {
        if (!name.is_string()) malformed("type", path, "must be a type name or a list of them");
        const std::string n = name.get<std::string>();
        if (std::find(std::begin(kTypeNames), std::end(kTypeNames), n) == std::end(kTypeNames))
          malformed("type", path, fmt::format("has unknown type '{}'", n));
        types.insert(n);
      }
      return types;
    }
    for (const auto& [key, value] : s.items()) {
      if (kObjectKeywords.count(key)) types.insert("object");
      if (kArrayKeywords.count(key) && key != "uniqueItems") types.insert("array");
      if (kStringKeywords.count(key)) types.insert("string");
      if (kNumberKeywords.count(key)) types.insert("number");
    }
    return types;
  }

  Alternatives any_of(const Json& branches, const std::string& keyword, const std::string& path,
                      const std::string& hint) {
    if (!branches.is_array() || branches.empty())
      malformed(keyword, path, "must be a non-empty array");
    Alternatives alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      if (branches[i] == Json(false)) continue;  // a branch nothing satisfies
      const std::string at = fmt::format("{}/{}", child(path, keyword), i);
      for (std::string& a : schema(branches[i], at, fmt::format("{}-{}", hint, i)))
        alts.push_back(std::move(a));
    }
    if (alts.empty())
      fail("{}: no branch of '{}' at {} admits a value", kWhere, keyword, pointer_text(path));
    // Deduplicate (Optional[X] | None twice, the same $ref in two branches).
    Alternatives unique;
    for (std::string& a : alts)
      if (std::find(unique.begin(), unique.end(), a) == unique.end()) unique.push_back(a);
    return unique;
  }

  // enum / const, filtered by `type` when present.
  Alternatives values(const Json& s, const std::string& path) {
    Json list;
    std::string keyword = "enum";
    if (s.contains("const")) {
      if (s.contains("enum")) unsupported("enum", path, " beside 'const'");
      keyword = "const";
      list = Json::array({s["const"]});
    } else {
      list = s["enum"];
      if (!list.is_array() || list.empty()) malformed("enum", path, "must be a non-empty array");
    }
    const std::set<std::string> types =
        s.contains("type") ? type_set(s, path) : std::set<std::string>{};
    Alternatives alts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!types.empty() && !types.count(type_of(list[i])) &&
          !(types.count("number") && list[i].is_number()) &&
          !(types.count("integer") && is_integral(list[i])))
        continue;
      std::string lit = value_literal(list[i], fmt::format("{}/{}", child(path, keyword), i));
      if (std::find(alts.begin(), alts.end(), lit) == alts.end()) alts.push_back(lit);
    }
    if (alts.empty())
      malformed(keyword, path, "has no value of the schema's 'type': no value satisfies it");
    return alts;
  }

  static std::string type_of(const Json& v) {
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    return is_integral(v) ? "integer" : "number";
  }
  static bool is_integral(const Json& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::fabs(d) < 9e15 && std::floor(d) == d;
  }

  // A fixed JSON value, with whitespace allowed between its tokens.
  std::string value_literal(const Json& v, const std::string& path) {
    if (v.is_object()) {
      std::vector<std::string> members;
      for (const auto& [key, value] : v.items())
        members.push_back(
            seq({key_literal(key, path), value_literal(value, child(path, key)), "ws"}));
      use("ws");
      return seq({"\"{\" ws", join(members, " \",\" ws "), "\"}\""});
    }
    if (v.is_array()) {
      std::vector<std::string> items;
      for (size_t i = 0; i < v.size(); ++i)
        items.push_back(value_literal(v[i], fmt::format("{}/{}", path, i)) + " ws");
      use("ws");
      return seq({"\"[\" ws", join(items, " \",\" ws "), "\"]\""});
    }
    if (gemma_ && v.is_string()) {
      compact(v, path);  // UTF-8 check
      return literal(kGemmaQuote + v.get<std::string>() + kGemmaQuote);
    }
    return literal(compact(v, path));
  }

  // A member's key and the ':' after it: JSON's quoted key, or Gemma 4's bare one (no space
  // before the ':', which its reader would take into the key).
  std::string key_literal(const std::string& key, const std::string& path) {
    if (gemma_) return literal(key + ":") + " ws";
    return seq({literal(compact(Json(key), path)), "ws \":\" ws"});
  }

  // limit: the largest count a grammar repetition can take (kUnbounded: a bound that is only
  // compared, like a length beside a pattern).
  static uint64_t count(const Json& s, const char* keyword, const std::string& path,
                        uint64_t otherwise, uint64_t limit = kMaxCount) {
    if (!s.contains(keyword)) return otherwise;
    const Json& v = s[keyword];
    if (!is_integral(v) || v.get<double>() < 0)
      malformed(keyword, path, "must be a non-negative integer");
    const uint64_t n = v.get<uint64_t>();
    if (n > limit) unsupported(keyword, path, fmt::format(" above {} (here {})", limit, n));
    return n;
  }

  std::string string(const Json& s, const std::string& path) {
    const bool patterned = s.contains("format") || s.contains("pattern");
    if (gemma_ && patterned) return use("string");  // formats, patterns: JSON strings only
    if (patterned) return pattern_string(s, path);
    if (!s.contains("minLength") && !s.contains("maxLength")) return use("string");
    const uint64_t lo = count(s, "minLength", path, 0);
    const uint64_t hi = count(s, "maxLength", path, kUnbounded);
    if (hi < lo) malformed("maxLength", path, "is below minLength: no string satisfies both");
    const std::string c = use("char");
    if (gemma_)  // bounded Gemma 4 strings hold no '<' (keeps each character one atom)
      return seq({"(", literal(kGemmaQuote), repeated(c, lo, hi), literal(kGemmaQuote), ")"});
    return seq({"( \"\\\"\"", repeated(c, lo, hi), "\"\\\"\" )"});
  }

  // A string of a `pattern` or a `format` (its regular expression), within minLength and
  // maxLength (json_schema_pattern.h says which bounds are exact).
  std::string pattern_string(const Json& s, const std::string& path) {
    const std::string keyword = s.contains("pattern") ? "pattern" : "format";
    if (keyword == "pattern" && s.contains("format"))
      unsupported("format", path, " beside 'pattern'");
    if (!s[keyword].is_string()) malformed(keyword, path, "must be a string");
    const std::string text = s[keyword].get<std::string>();
    std::string regex = text;
    if (keyword == "format") {
      const std::optional<std::string> r = string_format_regex(text);
      if (!r)
        unsupported("format", path,
                    fmt::format(" for '{}' (supported: {})", text, string_format_names()));
      regex = *r;
    }
    const uint64_t lo = count(s, "minLength", path, 0, kUnbounded);
    const uint64_t hi = count(s, "maxLength", path, kUnbounded, kUnbounded);
    const std::string key = fmt::format("{}\n{}\n{}", regex, lo, hi);
    if (auto known = pattern_rules_.find(key); known != pattern_rules_.end()) return known->second;
    const std::string name =
        fresh(keyword == "format" ? "format-" + name_part(text) : std::string("pattern"));
    try {
      StringPattern pattern(regex);
      if (lo > 0 || hi != kUnbounded)
        pattern.limit_length(lo, hi == kUnbounded ? std::nullopt : std::optional<uint64_t>(hi));
      const std::string expr = pattern.gbnf(
          [&](const std::string& body) { return define(fresh(name + "-chars"), {body}); });
      define(name, {expr});
    } catch (const PatternError& e) {
      if (e.unsupported)
        unsupported(keyword, path, fmt::format(" here: {} ('{}')", e.what(), text));
      malformed(keyword, path, fmt::format("('{}'): {}", text, e.what()));
    }
    pattern_rules_.emplace(key, name);
    return name;
  }

  // integer, number, boolean or null; bounds on integers become a range rule.
  std::string number(const Json& s, const std::string& path, const std::string& type,
                     const std::string& hint) {
    bool bounded = false;
    for (const std::string& k : kNumberKeywords) bounded |= s.contains(k);
    if (!bounded || (type != "integer" && type != "number")) return use(type);
    if (s.contains("multipleOf")) return multiple_of(s, path, type, hint);
    if (type == "number") return number_range(s, path, hint);
    std::optional<int64_t> lo, hi;
    auto raise = [](std::optional<int64_t>& b, int64_t v, bool up) {
      b = !b ? v : up ? std::max(*b, v) : std::min(*b, v);
    };
    for (const std::string& k : kNumberKeywords) {
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      if (v.is_boolean())
        unsupported(k, path, " in draft 4's boolean form (give the bound as a number)");
      if (!v.is_number()) malformed(k, path, "must be a number");
      const double d = v.get<double>();
      if (!(std::fabs(d) <= 1e18)) unsupported(k, path, " beyond +-1e18");
      // The integer bound: exact for integer JSON numbers, rounded inwards for fractions.
      const bool exact = v.is_number_integer();
      if (k == "minimum") raise(lo, exact ? v.get<int64_t>() : int64_t(std::ceil(d)), true);
      if (k == "exclusiveMinimum")
        raise(lo, exact ? v.get<int64_t>() + 1 : int64_t(std::floor(d)) + 1, true);
      if (k == "maximum") raise(hi, exact ? v.get<int64_t>() : int64_t(std::floor(d)), false);
      if (k == "exclusiveMaximum")
        raise(hi, exact ? v.get<int64_t>() - 1 : int64_t(std::ceil(d)) - 1, false);
    }
    if (lo && hi && *lo > *hi)
      fail("{}: no integer at {} lies between the bounds {} and {}", kWhere, pointer_text(path),
           *lo, *hi);
    return define(fresh(hint + "-range"), {integer_range_gbnf(lo, hi)});
  }

  // multipleOf (json_schema_multiple_of.cpp), with bounds beside it only at 0 (Pydantic's ge=0,
  // gt=0, le=0, lt=0): they fix the sign.
  std::string multiple_of(const Json& s, const std::string& path, const std::string& type,
                          const std::string& hint) {
    const Json& v = s["multipleOf"];
    if (!v.is_number() || !(v.get<double>() > 0))
      malformed("multipleOf", path, "must be a number greater than 0");
    int sign = 0;
    bool zero = true;
    for (const std::string& k : kNumberKeywords) {
      if (k == "multipleOf" || !s.contains(k)) continue;
      const int side = k.find("inimum") != std::string::npos ? 1 : -1;
      if (!s[k].is_number() || s[k].get<double>() != 0 || sign == -side)
        unsupported(k, path, " beside multipleOf, except 0 on one side (a sign)");
      sign = side;
      zero = zero && k.rfind("exclusive", 0) != 0;
    }
    const std::optional<DecimalBound> step = decimal_bound(v.dump(), false);
    const std::string name = fresh(hint + "-multiple");
    const auto rules = step ? multiple_of_gbnf(*step, name, type == "number", sign, zero)
                            : std::vector<std::pair<std::string, std::string>>{};
    if (rules.empty()) unsupported("multipleOf", path, " with more than 3 significant digits");
    for (const auto& [rule, body] : rules) {
      taken_.insert(rule);
      rules_.emplace_back(rule, body);
    }
    return name;
  }

  // Bounds on a `number`: exact decimal comparison against the bounds as the schema writes
  // them (json_schema_scalars.h), the tightest bound of each side.
  std::string number_range(const Json& s, const std::string& path, const std::string& hint) {
    std::optional<DecimalBound> lo, hi;
    for (const std::string& k : kNumberKeywords) {
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      if (v.is_boolean())
        unsupported(k, path, " in draft 4's boolean form (give the bound as a number)");
      if (!v.is_number()) malformed(k, path, "must be a number");
      const bool exclusive = k.rfind("exclusive", 0) == 0;
      const std::optional<DecimalBound> d = decimal_bound(v.dump(), exclusive);
      if (!d || std::fabs(v.get<double>()) > 1e15)
        unsupported(k, path, " beyond +-1e15 or with more than 40 fraction digits");
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      std::optional<DecimalBound>& side = lower ? lo : hi;
      const int c = side ? compare_decimals(*d, *side) : 0;
      if (!side || (lower ? c > 0 : c < 0) || (c == 0 && exclusive)) side = d;
    }
    // At most 15 significant digits, so a number distinct from a bound stays distinct as a
    // double: the integer part has at most the larger bound's digits.
    size_t whole = 1;
    for (const auto& b : {lo, hi})
      if (b) whole = std::max(whole, b->whole.size());
    const std::string body = number_range_gbnf(lo, hi, whole < 15 ? 15 - whole : 1);
    if (body.empty())
      fail("{}: no number at {} lies between its bounds", kWhere, pointer_text(path));
    return define(fresh(hint + "-range"), {body});
  }

  // ---- objects -----------------------------------------------------------------------------

  std::string object(const Json& s, const std::string& path, const std::string& name) {
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    use("ws");

    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) malformed("properties", path, "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) malformed("required", path, "must be an array of names");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) malformed("required", path, "must be an array of names");
        if (!props.contains(r.get<std::string>()))
          malformed("required", path,
                    fmt::format("names '{}', which 'properties' does not declare (not supported)",
                                r.get<std::string>()));
        required.insert(r.get<std::string>());
      }
    }
    // Extra members: absent additionalProperties means none when properties are declared.
    std::string extra;
    const bool open = s.contains("additionalProperties") ? s["additionalProperties"] != Json(false)
                                                         : !s.contains("properties");
    // A dictionary (no declared properties) may constrain its keys and their count, as
    // Pydantic writes Dict[constr(...), V] with min_length / max_length.
    for (const char* kw : {"propertyNames", "minProperties", "maxProperties", "patternProperties"})
      if (s.contains(kw) && !props.empty()) unsupported(kw, path, " beside 'properties'");
    // One patternProperties entry (Pydantic's Dict[constr(pattern=...), V]): every member's key
    // matches it and its value follows the entry's schema; other keys are not written (a subset
    // of what additionalProperties would allow).
    std::optional<std::pair<std::string, Json>> by_pattern;
    if (s.contains("patternProperties")) {
      const Json& pp = s["patternProperties"];
      if (!pp.is_object()) malformed("patternProperties", path, "must be an object");
      if (pp.size() != 1 || s.contains("propertyNames"))
        unsupported("patternProperties", path, " but with one pattern and no propertyNames");
      by_pattern.emplace(pp.begin().key(), pp.begin().value());
    }
    const uint64_t min_members = count(s, "minProperties", path, 0);
    const uint64_t max_members = count(s, "maxProperties", path, kUnbounded);
    if (max_members < min_members)
      malformed("maxProperties", path, "is below minProperties: no object satisfies both");
    if ((open || by_pattern) &&
        !(s.contains("propertyNames") && s["propertyNames"] == Json(false))) {
      const std::string at = by_pattern ? child(child(path, "patternProperties"), by_pattern->first)
                                        : child(path, "additionalProperties");
      const Json& extra_schema = by_pattern                           ? by_pattern->second
                                 : s.contains("additionalProperties") ? s["additionalProperties"]
                                                                      : Json(true);
      const std::string value = atom(schema(extra_schema, at, name + "-extra"), name + "-extra");
      extra = define(fresh(name + "-member"),
                     {gemma_ ? seq({use("gemma-key"), "\":\" ws", value, "ws"})
                             : seq({key_rule(s, path, name), "ws \":\" ws", value, "ws"})});
    }
    if (min_members > 0 && extra.empty())
      fail("{}: the object at {} needs {} members but admits none", kWhere, pointer_text(path),
           min_members);

    struct Member {
      std::string text;  // key ws ":" ws value ws
      bool required;
    };
    std::vector<Member> members;
    const std::string props_path = child(path, "properties");
    for (const auto& [key, prop] : props.items()) {
      const bool req = required.count(key) > 0;
      if (prop == Json(false)) {  // may not appear
        if (req)
          fail("{}: property '{}' at {} is required but its schema is false", kWhere, key,
               pointer_text(path));
        continue;
      }
      const std::string at = child(props_path, key);
      const std::string hint_key = name + "-" + name_part(key);
      std::string value = atom(schema(prop, at, hint_key), hint_key);
      // The member lists below repeat each member's text, and a bounded repetition expands
      // wherever its text appears: such a value gets a rule of its own, referred to instead.
      if (value.find('{') != std::string::npos && value.find(' ') != std::string::npos)
        value = define(fresh(hint_key), {value});
      members.push_back({seq({key_literal(key, at), value, "ws"}), req});
    }

    bool all_required = true;
    for (const Member& m : members) all_required &= m.required;
    std::string body;
    if (all_required && extra.empty()) {
      std::vector<std::string> texts;
      for (const Member& m : members) texts.push_back(m.text);
      body = join(texts, " \",\" ws ");
    } else {
      // after(i): members i.. once one member was written (each needs a comma);
      // first[i]: members i.. when none was written yet. Linear in the member count: each
      // after(i) is a rule (made when first referred to) that refers to the next one.
      const size_t n = members.size();
      const std::string tail = extra.empty() ? "" : fmt::format("( \",\" ws {} )*", extra);
      std::vector<std::string> after_rule(n);
      std::function<std::string(size_t)> after = [&](size_t i) -> std::string {
        if (i == n) return tail;
        if (!after_rule[i].empty()) return after_rule[i];
        const Member& m = members[i];
        const std::string piece =
            m.required ? seq({"\",\" ws", m.text}) : fmt::format("( \",\" ws {} )?", m.text);
        const std::string text = seq({piece, after(i + 1)});
        if (i + 1 == n && tail.empty()) return text;  // short: inline
        return after_rule[i] = define(fresh(fmt::format("{}-after{}", name, i)), {text});
      };
      std::vector<std::string> first(n + 1);
      first[n] = extra.empty() ? "" : fmt::format("( {} ( \",\" ws {} )* )?", extra, extra);
      for (size_t i = n; i-- > 0;) {
        const Member& m = members[i];
        const std::string with = seq({m.text, after(i + 1)});
        if (m.required) {
          first[i] = with;
        } else if (first[i + 1].empty()) {
          first[i] = fmt::format("( {} )?", with);
        } else {
          first[i] = define(fresh(fmt::format("{}-from{}", name, i)), {with, first[i + 1]});
        }
      }
      body = first[0];
    }
    if (members.empty() && !extra.empty() && (min_members > 0 || max_members != kUnbounded)) {
      const std::string more =
          repeated(fmt::format("( \",\" ws {} )", extra), min_members > 0 ? min_members - 1 : 0,
                   max_members == kUnbounded ? kUnbounded : max_members - 1);
      body = max_members == 0 ? "" : seq({extra, more});
      if (min_members == 0 && max_members > 0) body = "( " + body + " )?";
    }
    rules_[slot].second = seq({"\"{\" ws", body, "\"}\""});
    return name;
  }

  // A dictionary member's key: any JSON string, or one its `propertyNames` admits (a string
  // schema: type, pattern, format, lengths, enum, const and annotations).
  std::string key_rule(const Json& s, const std::string& path, const std::string& name) {
    if (s.contains("patternProperties")) {
      const Json names = {{"type", "string"}, {"pattern", s["patternProperties"].begin().key()}};
      return atom(schema(names, child(path, "patternProperties"), name + "-key"), name + "-key");
    }
    if (!s.contains("propertyNames") || s["propertyNames"] == Json(true)) return use("string");
    const std::string at = child(path, "propertyNames");
    Json names = s["propertyNames"];
    if (!names.is_object()) malformed("propertyNames", path, "must be a schema");
    for (const auto& [key, value] : names.items()) {
      const bool stringy = kStringKeywords.count(key) || kAnnotations.count(key) || key == "enum" ||
                           key == "const" || key == "type";
      if (!stringy) unsupported(key, at, " in propertyNames (only string keywords)");
    }
    if (names.contains("type") && names["type"] != Json("string"))
      unsupported("type", at, " in propertyNames other than \"string\"");
    names["type"] = "string";  // keys are strings (an enum keeps its string values)
    return atom(schema(names, at, name + "-key"), name + "-key");
  }

  // ---- arrays ------------------------------------------------------------------------------

  std::string array(const Json& s, const std::string& path, const std::string& name) {
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    use("ws");

    // Positional schemas, then the schema of every further item.
    Json prefix = Json::array();
    std::string prefix_kw = "prefixItems";
    Json rest = true;
    std::string rest_kw = "items";
    if (s.contains("prefixItems")) {
      prefix = s["prefixItems"];
      if (!prefix.is_array()) malformed("prefixItems", path, "must be an array of schemas");
      if (s.contains("items")) rest = s["items"];
      if (s.contains("additionalItems"))
        unsupported("additionalItems", path, " beside prefixItems");
    } else if (s.contains("items") && s["items"].is_array()) {  // draft 4-2019 tuples
      prefix = s["items"];
      prefix_kw = "items";
      rest_kw = "additionalItems";
      if (s.contains("additionalItems")) rest = s["additionalItems"];
    } else {
      if (s.contains("items")) rest = s["items"];
      if (s.contains("additionalItems"))
        unsupported("additionalItems", path, " without a list of items");
    }
    const uint64_t lo = count(s, "minItems", path, 0);
    uint64_t hi = count(s, "maxItems", path, kUnbounded);
    for (size_t i = 0; i < prefix.size(); ++i)
      if (prefix[i] == Json(false)) hi = std::min<uint64_t>(hi, i);
    if (rest == Json(false)) hi = std::min<uint64_t>(hi, prefix.size());
    if (hi < lo)
      fail("{}: the array at {} must have at least {} and at most {} items: no array does", kWhere,
           pointer_text(path), lo, hi);

    const uint64_t k = std::min<uint64_t>(prefix.size(), hi);
    std::string body;
    if (k < hi) {  // the repeated tail from position k on
      const std::string item =
          atom(schema(rest, child(path, rest_kw), name + "-item"), name + "-item");
      const uint64_t tail_lo = lo > k ? lo - k : 0;
      const uint64_t tail_hi = hi == kUnbounded ? kUnbounded : hi - k;
      const std::string next = fmt::format("( \",\" ws {} ws )", item);
      if (k > 0) {
        body = repeated(next, tail_lo, tail_hi);
      } else {
        const std::string more = repeated(next, tail_lo > 0 ? tail_lo - 1 : 0,
                                          tail_hi == kUnbounded ? kUnbounded : tail_hi - 1);
        body = seq({item, "ws", more});
        if (tail_lo == 0) body = fmt::format("( {} )?", body);
      }
    }
    for (uint64_t i = k; i-- > 0;) {  // positional items, innermost last
      const std::string at = fmt::format("{}/{}", child(path, prefix_kw), i);
      const std::string hint_i = fmt::format("{}-{}", name, i);
      const std::string item = atom(schema(prefix[i], at, hint_i), hint_i);
      body = seq({i > 0 ? "\",\" ws" : "", item, "ws", body});
      if (i >= lo) body = fmt::format("( {} )?", body);
    }
    rules_[slot].second = seq({"\"[\" ws", body, "\"]\""});
    return name;
  }

  static inline const std::string kGemmaQuote = "<|\"|>";
  const Json& root_;
  const bool gemma_;                                        // ValueSyntax::Gemma4
  std::vector<std::pair<std::string, std::string>> rules_;  // in definition order
  std::set<std::string> taken_;
  std::set<std::string> used_;
  std::map<std::string, std::string> ref_names_;      // $ref -> rule
  std::map<std::string, std::string> pattern_rules_;  // regex and length bounds -> rule
};

}  // namespace

SchemaGrammar json_schema_to_gbnf(const nlohmann::ordered_json& schema, ValueSyntax syntax) {
  SchemaGrammar out{Converter(schema, syntax).run()};
  // Compile once here: schemas without a finite instance fail now, with a message, rather
  // than inside the inferlet.
  grammar::Grammar g;
  std::string err;
  if (!grammar::Grammar::parse(out.gbnf, &g, &err)) {
    if (err.find("derives no finite string") != std::string::npos)
      fail(
          "{}: no finite JSON value satisfies the schema (a required property or item must "
          "contain itself forever): {}",
          kWhere, err);
    if (err.find("left recursion") != std::string::npos)
      fail(
          "{}: a $ref leads back to its own schema without nesting it inside an object or "
          "array: {}",
          kWhere, err);
    if (err.find("repetitions expand") != std::string::npos)
      fail(
          "{}: the schema's length and count bounds (maxLength, maxItems, ...) make a grammar too "
          "large to enforce: {}",
          kWhere, err);
    fail("{}: internal error: the grammar made from the schema does not compile: {}", kWhere, err);
  }
  return out;
}

SchemaGrammar json_schema_to_gbnf(const nlohmann::json& schema, ValueSyntax syntax) {
  return json_schema_to_gbnf(nlohmann::ordered_json(schema), syntax);
}

}  // namespace pith::server
