// GBNF for constrained JSON scalars, used by the JSON Schema converter (json_schema_grammar.cpp):
// integers within bounds (minimum / maximum), and the regular expressions of string `format`s
// (json_schema_pattern.h turns them into grammar).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pith::server {

// GBNF alternatives matching exactly the decimal integers in [lo, hi] as JSON writes them (no
// leading zeros, no "-0", no fraction or exponent); nullopt: unbounded on that side.
// Requires lo <= hi when both are set. Disjoint alternatives, so the matcher keeps one stack.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// A bound of a `number` range, as a decimal: its digits without exponent.
struct DecimalBound {
  bool negative = false;
  std::string whole = "0";  // integer digits, no leading zeros
  std::string fraction;     // fraction digits, no trailing zeros
  bool exclusive = false;
};

// The decimal a JSON number's text spells ("0.1", "1e-05", "-2.5E+3"; what nlohmann's dump
// writes for a double is its shortest round-trip form), or nullopt beyond 16 integer or 40
// fraction digits.
std::optional<DecimalBound> decimal_bound(const std::string& json_number, bool exclusive);

// -1, 0, 1 as a's value is below, equal to or above b's (exclusive flags ignored).
int compare_decimals(const DecimalBound& a, const DecimalBound& b);

// GBNF alternatives matching the JSON numbers in [lo, hi] (nullopt: unbounded; exclusive bounds
// left out) written without exponent and with at most max_fraction fraction digits: exact
// decimal comparison, so every match is in range for any validator that parses numbers as
// doubles (max_fraction keeps them at 15 significant digits, where distinct decimals stay
// distinct doubles). "" when no number is in range.
std::string number_range_gbnf(const std::optional<DecimalBound>& lo,
                              const std::optional<DecimalBound>& hi, size_t max_fraction);

// GBNF rules (name, body; the first is `name`, the entry) for the JSON numbers that are whole
// multiples of `step` (> 0), written without exponent. With step = M / 10^d (d its fraction
// digits), x is a multiple when x * 10^d is an integer divisible by M: the rules follow the
// remainder mod M digit by digit (integer digits, then up to d fraction digits when `fraction`;
// none for integers), so every match is an exact decimal multiple. `sign`: +1 non-negative,
// -1 non-positive, 0 either; `zero`: whether 0 itself is allowed (exclusive bounds at 0).
// Empty when M exceeds 1000 (more than 3 significant digits in the step).
std::vector<std::pair<std::string, std::string>> multiple_of_gbnf(const DecimalBound& step,
                                                                  const std::string& name,
                                                                  bool fraction, int sign,
                                                                  bool zero);

// The (anchored) regular expression of a supported `format`, or nullopt:
//   date       RFC 3339 full-date, years 0001-9999, days per month, February 29 in leap years
//   time       RFC 3339 full-time: hh:mm:ss (no leap second), up to 6 fraction digits, Z or a
//              numeric offset
//   date-time  date "T" time (upper-case T and Z only)
//   duration   ISO 8601 / RFC 3339 duration: P1Y2M3DT4H5M6S, PT0.5S, P2W; fields of up to 6
//              digits, seconds with up to 6 fraction digits (so it fits a timedelta)
//   uuid       RFC 4122 text: 8-4-4-4-12 hex digits
//   email      a dot-atom local part (at most one dot, 64 characters) "@" one or two LDH labels
//              and a letters-only top-level label: RFC 5321 without quoted local parts or
//              address literals, within its 254 characters
//   hostname   RFC 1123: up to 4 LDH labels of up to 62 characters (within 253 in all)
//   ipv4       dotted quad without leading zeros
//   ipv6       RFC 4291 hex groups with at most one "::" (no embedded IPv4)
//   uri        RFC 3986 scheme "://" host (up to 4 LDH labels, the last starting with a letter
//              as URL parsers need, or [IPv6]) port (0-65535)? path? query? fragment?, its
//              characters and %HH escapes; no user info
// Each is a subset of what the format's validators (and Python's date, time, timedelta and URL
// types) accept, so every match validates.
std::optional<std::string> string_format_regex(const std::string& format);

// The names string_format_regex knows, comma separated (for error messages).
const char* string_format_names();

}  // namespace pith::server
