// GBNF for constrained JSON scalars, used by the JSON Schema converter (json_schema_grammar.cpp):
// integers within bounds (minimum / maximum) and strings of a `format`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pith::server {

// GBNF alternatives matching exactly the decimal integers in [lo, hi] as JSON writes them (no
// leading zeros, no "-0", no fraction or exponent); nullopt: unbounded on that side.
// Requires lo <= hi when both are set. Disjoint alternatives, so the matcher keeps one stack.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// GBNF for the JSON string (quotes included) of a supported `format`, or nullopt:
//   date       RFC 3339 full-date, days per month (February 29 in every year)
//   time       RFC 3339 full-time: hh:mm:ss, optional fraction, Z or a numeric offset
//   date-time  date "T" time (RFC 3339 date-time; t and z also lower case)
//   uuid       RFC 4122 text: 8-4-4-4-12 hex digits
std::optional<std::string> string_format_gbnf(const std::string& format);

}  // namespace pith::server
