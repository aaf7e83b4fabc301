// JSON Schema `pattern` and the regular string `format`s as GBNF over a JSON string's text, for
// the JSON Schema converter (json_schema_grammar.cpp).
//
// A pattern is an ECMA-262 regular expression that must match somewhere in the string (JSON
// Schema: unanchored unless an alternative starts with ^ / ends with $). Supported: literal
// characters and escapes (\n \t \r \f \v \0 \xHH \uHHHH, surrogate pairs, \u{H...} \cX, escaped
// syntax characters), `.`, classes [...] and [^...] with ranges, \d \D \w \W \s \S, groups (...),
// (?:...), (?<name>...), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms match the
// same strings), ^ at the start and $ at the end of a top-level alternative. Refused, with the
// reason: backreferences, lookaround, \b \B, \p{...}, anchors elsewhere, counts above 1000.
//
// The grammar writes each character in one JSON spelling: as itself, except `"`, `\` and control
// characters, which are escaped (\" \\ \b \f \n \r \t, \u00XX for the others).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pith::server {

// Why a pattern (or its length bounds) cannot become a grammar. `unsupported`: valid JSON
// Schema that the converter does not enforce; otherwise the pattern is malformed or nothing
// satisfies it.
class PatternError : public std::runtime_error {
 public:
  PatternError(const std::string& what, bool unsupported)
      : std::runtime_error(what), unsupported(unsupported) {}
  bool unsupported;
};

class StringPattern {
 public:
  // Parses an ECMA-262 regular expression (UTF-8). Throws PatternError.
  explicit StringPattern(const std::string& regex);
  ~StringPattern();
  StringPattern(StringPattern&&) noexcept;
  StringPattern& operator=(StringPattern&&) noexcept;

  // Shortest and longest match in characters (code points); longest nullopt: unbounded.
  uint64_t min_length() const;
  std::optional<uint64_t> max_length() const;

  // Keeps the matches of lo..hi characters (minLength / maxLength beside the pattern). Exact
  // where each alternative has one part of variable length and that part repeats a fixed-length
  // piece (^[a-z]+$, ^\d{3}-\w*$); otherwise a subset: the last unbounded repetition of an
  // alternative is raised to reach lo, and every unbounded repetition is capped at the largest
  // count that keeps each match within hi. Throws PatternError when neither works or no
  // string is left.
  void limit_length(uint64_t lo, std::optional<uint64_t> hi);

  // The JSON string (quotes included) as one GBNF expression. Character classes become rules
  // through define(body), which returns the rule's name.
  std::string gbnf(const std::function<std::string(const std::string& body)>& define) const;

  struct Node;

 private:
  std::vector<Node> alternatives_;  // each a concatenation
};

}  // namespace pith::server
