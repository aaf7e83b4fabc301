// The GBNF rules and text helpers the JSON Schema converter (json_schema_grammar.cpp) shares
// between schemas: whitespace, strings, numbers, any JSON value, and Gemma 4's tool-call value
// syntax. Each is emitted once, when a schema uses it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace pith::server::json_schema_rules {

// Whitespace between tokens: nothing, one space, or a newline and up to 20 blanks of indentation
// (pretty-printing with 2-space indents to depth 10). Bounded, because a masked model that likes
// spaces could otherwise emit them until max_tokens; the same shape as json_gbnf()'s `ws`.
constexpr const char* kWs = R"(( " " | "\n" [ \t]{0,20} )?)";

// Shared rules, emitted when used; `needs` lists the shared rules each refers to.
struct SharedRule {
  const char* name;
  const char* body;
  std::vector<const char*> needs;
};
const SharedRule kShared[] = {
    {"ws", kWs, {}},
    {"string", R"("\"" char* "\"")", {"char"}},
    {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
    {"integer", R"("-"? ( "0" | [1-9] [0-9]* ))", {}},
    {"number", R"("-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)", {}},
    {"boolean", R"("true" | "false")", {}},
    {"null", R"("null")", {}},
    {"any-value",
     "any-object | any-array | string | number | boolean | null",
     {"any-object", "any-array", "string", "number", "boolean", "null"}},
    {"any-object", R"("{" ws ( any-member ( "," ws any-member )* )? "}")", {"any-member", "ws"}},
    {"any-member", R"(string ws ":" ws any-value ws)", {"string", "any-value", "ws"}},
    {"any-array", R"("[" ws ( any-value ws ( "," ws any-value ws )* )? "]")", {"any-value", "ws"}},
    // Gemma 4's tool-call values (ValueSyntax::Gemma4): strings are <|"|>-quoted and hold any
    // text without <|"|> (a regular expression over the states after '<', "<|", "<|\"" and
    // "<|\"|"), object keys are unquoted up to ':'.
    {"gemma-string", R"("<|\"|>" gemma-text "<|\"|>")", {"gemma-text"}},
    {"gemma-text",
     R"(( [^<] | "<" gemma-lt-stay* gemma-lt-leave )* ( "<" gemma-lt-stay* ( "|" ( "\"" "|"? )? )? )?)",
     {"gemma-lt-stay", "gemma-lt-leave"}},
    {"gemma-lt-stay", R"("<" | "|<" | "|\"<" | "|\"|<")", {}},
    {"gemma-lt-leave", R"([^<|] | "|" [^<"] | "|\"" [^<|] | "|\"|" [^<>])", {}},
    {"gemma-char", R"([^<])", {}},
    {"gemma-any-value",
     "gemma-any-object | gemma-any-array | gemma-string | number | boolean | null",
     {"gemma-any-object", "gemma-any-array", "gemma-string", "number", "boolean", "null"}},
    {"gemma-any-object",
     R"("{" ws ( gemma-any-member ( "," ws gemma-any-member )* )? "}")",
     {"gemma-any-member", "ws"}},
    {"gemma-any-member",
     R"(gemma-key ":" ws gemma-any-value ws)",
     {"gemma-key", "gemma-any-value", "ws"}},
    {"gemma-any-array",
     R"("[" ws ( gemma-any-value ws ( "," ws gemma-any-value ws )* )? "]")",
     {"gemma-any-value", "ws"}},
    {"gemma-key", R"([^:}<, \n] [^:}<]*)", {}},
};

// "x{lo,hi}" in GBNF ("" when it matches only the empty string); hi = UINT64_MAX: unbounded.
inline std::string repeated(const std::string& atom, uint64_t lo, uint64_t hi) {
  if (hi == 0) return "";
  if (hi == std::numeric_limits<uint64_t>::max()) {
    if (lo == 0) return atom + "*";
    if (lo == 1) return atom + "+";
    return fmt::format("{}{{{},}}", atom, lo);
  }
  if (lo == hi) return lo == 1 ? atom : fmt::format("{}{{{}}}", atom, lo);
  if (lo == 0 && hi == 1) return atom + "?";
  return fmt::format("{}{{{},{}}}", atom, lo, hi);
}

// A GBNF string literal matching exactly these bytes (UTF-8 passes through as characters).
inline std::string literal(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Rule names keep to letters, digits and '-': the GBNF parser names its helper rules
// `<rule>_<n>`, so an '_' from a property name could collide with one.
inline std::string name_part(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
  }
  return out.empty() ? "x" : out.substr(0, 40);
}

inline std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

inline std::string seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts)
    if (!p.empty()) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace pith::server::json_schema_rules
