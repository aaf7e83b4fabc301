// Integer ranges and string formats as GBNF (see json_schema_scalars.h).
//
// Ranges use the construction regex generators use for numeric ranges: split [lo, hi] by digit
// count, then split each equal-length range at its first differing digit into "low edge",
// "full middle" and "high edge" parts, e.g. [123, 456] -> "12" [3-9] | "1" [3-9] [0-9] |
// [2-3] [0-9]{2} | "4" [0-4] [0-9] | "45" [0-6]. Every integer matches one alternative only.
#include "server/json_schema_scalars.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace pith::server {
namespace {

std::string then(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string digits(char lo, char hi) {
  if (lo == hi) return fmt::format("\"{}\"", lo);
  if (lo == '0' && hi == '9') return "[0-9]";
  return fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

// Sequences (each after `head`) matching the digit strings between x and y, both of one length.
void same_length(const std::string& head, const std::string& x, const std::string& y,
                 std::vector<std::string>& out) {
  size_t i = 0;
  while (i < x.size() && x[i] == y[i]) ++i;
  const std::string h = i > 0 ? then(head, "\"" + x.substr(0, i) + "\"") : head;
  if (i == x.size()) {
    out.push_back(h);
    return;
  }
  const size_t rest = x.size() - i - 1;
  const std::string xs = x.substr(i + 1), ys = y.substr(i + 1);
  const bool low_full = xs.find_first_not_of('0') == std::string::npos;
  const bool high_full = ys.find_first_not_of('9') == std::string::npos;
  const char mid_lo = low_full ? x[i] : static_cast<char>(x[i] + 1);
  const char mid_hi = high_full ? y[i] : static_cast<char>(y[i] - 1);
  if (!low_full) same_length(then(h, digits(x[i], x[i])), xs, std::string(rest, '9'), out);
  if (mid_lo <= mid_hi) out.push_back(then(then(h, digits(mid_lo, mid_hi)), any_digits(rest)));
  if (!high_full) same_length(then(h, digits(y[i], y[i])), std::string(rest, '0'), ys, out);
}

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Alternatives for the integers in [a, b] (b nullopt: unbounded), a >= 0.
void non_negative(uint64_t a, std::optional<uint64_t> b, std::vector<std::string>& out) {
  if (b && a > *b) return;
  if (a == 0) {
    out.push_back("\"0\"");
    if (b && *b == 0) return;
    a = 1;
  }
  const std::string as = std::to_string(a);
  if (!b) {
    same_length("", as, std::string(as.size(), '9'), out);
    out.push_back(fmt::format("[1-9] [0-9]{{{},}}", as.size()));  // longer numbers
    return;
  }
  const size_t b_len = std::to_string(*b).size();
  for (size_t len = as.size(); len <= b_len; ++len) {
    const uint64_t lo = std::max(a, pow10(len - 1)), hi = std::min(*b, pow10(len) - 1);
    same_length("", std::to_string(lo), std::to_string(hi), out);
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out;
}

// Month and day together, so each month gets its own number of days.
constexpr const char* kDate =
    R"([0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | )"
    R"(( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | )"
    R"("02-" ( "0" [1-9] | [12] [0-9] ) ))";
constexpr const char* kTime =
    R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]+ )? )"
    R"(( [zZ] | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
constexpr const char* kUuid =
    R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" )"
    R"([0-9a-fA-F]{12})";

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!hi || *hi < 0 || !lo || *lo < 0) {
    // Negative values in [lo, min(hi, -1)], as "-" and their magnitude.
    if (!lo || *lo < 0) {
      const uint64_t m_lo = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
      std::optional<uint64_t> m_hi;
      if (lo) m_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
      std::vector<std::string> magnitudes;
      non_negative(m_lo, m_hi, magnitudes);
      if (!magnitudes.empty())
        alts.push_back(magnitudes.size() == 1 ? "\"-\" " + magnitudes[0]
                                              : "\"-\" ( " + join(magnitudes) + " )");
    }
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    non_negative(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, b, alts);
  }
  return join(alts);
}

std::optional<std::string> string_format_gbnf(const std::string& format) {
  std::string body;
  if (format == "date")
    body = kDate;
  else if (format == "time")
    body = kTime;
  else if (format == "date-time")
    body = fmt::format("{} [tT] {}", kDate, kTime);
  else if (format == "uuid")
    body = kUuid;
  else
    return std::nullopt;
  return fmt::format("\"\\\"\" {} \"\\\"\"", body);
}

}  // namespace pith::server
