// Integer ranges as GBNF and string formats as regular expressions (see json_schema_scalars.h).
//
// Ranges use the construction regex generators use for numeric ranges: split [lo, hi] by digit
// count, then split each equal-length range at its first differing digit into "low edge",
// "full middle" and "high edge" parts, e.g. [123, 456] -> "12" [3-9] | "1" [3-9] [0-9] |
// [2-3] [0-9]{2} | "4" [0-4] [0-9] | "45" [0-6]. Every integer matches one alternative only.
#include "server/json_schema_scalars.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
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

// ---- decimal ranges --------------------------------------------------------------------------

std::optional<DecimalBound> decimal_bound(const std::string& text, bool exclusive) {
  DecimalBound d;
  d.exclusive = exclusive;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  std::string digits;  // mantissa digits, the point after `point` of them
  size_t point = std::string::npos;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = digits.size();
    } else if (text[i] >= '0' && text[i] <= '9') {
      digits += text[i];
    } else {
      return std::nullopt;
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point == std::string::npos) point = digits.size();
  long exponent = 0;
  if (i < text.size()) {
    try {
      exponent = std::stol(text.substr(i + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  if (exponent > 40 || exponent < -40) return std::nullopt;
  const long at = static_cast<long>(point) + exponent;  // the point's place in `digits`
  if (at <= 0) {
    d.whole = "0";
    d.fraction = std::string(static_cast<size_t>(-at), '0') + digits;
  } else if (static_cast<size_t>(at) >= digits.size()) {
    d.whole = digits + std::string(static_cast<size_t>(at) - digits.size(), '0');
  } else {
    d.whole = digits.substr(0, static_cast<size_t>(at));
    d.fraction = digits.substr(static_cast<size_t>(at));
  }
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size() - 1));
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.whole.size() > 16 || d.fraction.size() > 40) return std::nullopt;
  if (d.whole == "0" && d.fraction.empty()) d.negative = false;  // -0 is 0
  return d;
}

namespace {

// Magnitudes compared (signs ignored).
int compare_magnitudes(const DecimalBound& a, const DecimalBound& b) {
  if (a.whole.size() != b.whole.size()) return a.whole.size() < b.whole.size() ? -1 : 1;
  if (a.whole != b.whole) return a.whole < b.whole ? -1 : 1;
  const size_t n = std::max(a.fraction.size(), b.fraction.size());
  const std::string fa = a.fraction + std::string(n - a.fraction.size(), '0');
  const std::string fb = b.fraction + std::string(n - b.fraction.size(), '0');
  return fa == fb ? 0 : fa < fb ? -1 : 1;
}

// Fraction digit strings F (1..max_len digits) with lo <= 0.F <= hi, each bound optional and
// possibly strict, as one GBNF expression built by walking F's digits: `lo_at` / `hi_at` are
// the digits of lo / hi that F still equals (npos: that side no longer binds).
struct FractionRange {
  const std::string* lo;
  const std::string* hi;
  bool lo_strict, hi_strict;
  size_t max_len;

  static constexpr size_t kFree = std::string::npos;

  // May F end here (its remaining digits zeros)?
  bool can_end(size_t lo_at, size_t hi_at) const {
    const bool lo_ok = lo_at == kFree || (lo_at >= lo->size() && !lo_strict);
    const bool hi_ok = hi_at == kFree || hi_at < hi->size() || !hi_strict;
    return lo_ok && hi_ok;
  }

  // Digits from position `used` on (at least one); "" if none can follow.
  std::string digits_from(size_t used, size_t lo_at, size_t hi_at) const {
    if (lo_at == kFree && hi_at == kFree)
      return used + 1 == max_len ? "[0-9]" : fmt::format("[0-9]{{1,{}}}", max_len - used);
    const int ld = lo_at == kFree ? 0 : lo_at < lo->size() ? (*lo)[lo_at] - '0' : 0;
    const int hd = hi_at == kFree ? 9 : hi_at < hi->size() ? (*hi)[hi_at] - '0' : 0;
    if (ld > hd) return "";
    std::vector<std::string> alts;
    auto add = [&](int a, int b, size_t next_lo, size_t next_hi) {
      if (a > b) return;
      const std::string cls = a == b ? fmt::format("\"{}\"", a) : fmt::format("[{}-{}]", a, b);
      const bool end = can_end(next_lo, next_hi);
      const std::string more = used + 1 < max_len ? digits_from(used + 1, next_lo, next_hi) : "";
      if (more.empty()) {
        if (end) alts.push_back(cls);
      } else {
        alts.push_back(fmt::format("{} {}{}", cls,
                                   more.find(' ') == std::string::npos ? more : "( " + more + " )",
                                   end ? "?" : ""));
      }
    };
    const size_t lo_next = lo_at == kFree ? kFree : lo_at + 1;
    const size_t hi_next = hi_at == kFree ? kFree : hi_at + 1;
    if (ld == hd) {
      add(ld, ld, lo_next, hi_next);
    } else {
      add(ld, ld, lo_next, kFree);
      add(ld + 1, hd - 1, kFree, kFree);
      add(hd, hd, kFree, hi_next);
    }
    if (alts.empty()) return "";
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
    return alts.size() == 1 ? out : "( " + out + " )";
  }
};

// "WHOLE" then an optional fraction, for integer part `whole` and the fraction constraints.
void whole_with_fraction(const std::string& whole, const std::string* lo, bool lo_strict,
                         const std::string* hi, bool hi_strict, size_t max_fraction,
                         std::vector<std::string>& out) {
  static const std::string kNone;
  FractionRange f{lo ? lo : &kNone, hi ? hi : &kNone, lo_strict, hi_strict, max_fraction};
  // An inclusive bound of no fraction binds nothing below it: every F is >= 0.
  const bool lo_binds = lo && !(lo->empty() && !lo_strict);
  const size_t lo_at = lo_binds ? 0 : FractionRange::kFree;
  const size_t hi_at = hi ? 0 : FractionRange::kFree;
  const std::string digits = f.digits_from(0, lo_at, hi_at);
  const bool bare = f.can_end(lo_at, hi_at);  // WHOLE itself, i.e. WHOLE.0
  const std::string head = fmt::format("\"{}\"", whole);
  if (digits.empty()) {
    if (bare) out.push_back(head);
    return;
  }
  out.push_back(fmt::format("{} ( \".\" {} ){}", head, digits, bare ? "?" : ""));
}

// Alternatives for magnitudes in [a, b] (b nullopt: unbounded), a <= b, non-negative.
void magnitudes(const DecimalBound& a, const std::optional<DecimalBound>& b, size_t max_fraction,
                std::vector<std::string>& out) {
  const std::string any_fraction = fmt::format("( \".\" [0-9]{{1,{}}} )?", max_fraction);
  const int64_t A = std::stoll(a.whole);
  if (!b) {
    whole_with_fraction(a.whole, &a.fraction, a.exclusive, nullptr, false, max_fraction, out);
    const std::string above = integer_range_gbnf(A + 1, std::nullopt);
    out.push_back(fmt::format("( {} ) {}", above, any_fraction));
    return;
  }
  const int64_t B = std::stoll(b->whole);
  if (A == B) {
    whole_with_fraction(a.whole, &a.fraction, a.exclusive, &b->fraction, b->exclusive, max_fraction,
                        out);
    return;
  }
  whole_with_fraction(a.whole, &a.fraction, a.exclusive, nullptr, false, max_fraction, out);
  if (A + 1 <= B - 1)
    out.push_back(fmt::format("( {} ) {}", integer_range_gbnf(A + 1, B - 1), any_fraction));
  whole_with_fraction(b->whole, nullptr, false, &b->fraction, b->exclusive, max_fraction, out);
}

}  // namespace

int compare_decimals(const DecimalBound& a, const DecimalBound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int m = compare_magnitudes(a, b);
  return a.negative ? -m : m;
}

std::string number_range_gbnf(const std::optional<DecimalBound>& lo,
                              const std::optional<DecimalBound>& hi, size_t max_fraction) {
  if (lo && hi) {
    const int c = compare_decimals(*lo, *hi);
    if (c > 0 || (c == 0 && (lo->exclusive || hi->exclusive))) return "";
  }
  std::vector<std::string> alts;
  DecimalBound zero;
  // Non-negative values: [max(lo, 0), hi].
  const bool hi_below_zero =
      hi && (hi->negative || (compare_decimals(*hi, zero) == 0 && hi->exclusive));
  if (!hi_below_zero) {
    DecimalBound from = zero;
    if (lo && !lo->negative) from = *lo;
    magnitudes(from, hi, max_fraction, alts);
  }
  // Negative values: "-" and magnitudes in (max(-hi, 0), -lo], 0 itself left out.
  if (!lo || lo->negative) {
    DecimalBound from = zero;
    from.exclusive = true;
    if (hi && hi->negative) {
      from = *hi;
      from.negative = false;
    }
    std::optional<DecimalBound> to;
    if (lo) {
      to = *lo;
      to->negative = false;
    }
    std::vector<std::string> negative;
    if (!to || compare_magnitudes(from, *to) < 0 ||
        (compare_magnitudes(from, *to) == 0 && !from.exclusive && !to->exclusive))
      magnitudes(from, to, max_fraction, negative);
    if (!negative.empty()) {
      std::string body;
      for (const std::string& n : negative) body += (body.empty() ? "" : " | ") + n;
      alts.push_back("\"-\" ( " + body + " )");
    }
  }
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

namespace {

// Years 0001-9999 (0000 is no year for most date types); February 29 only in leap years
// (divisible by 4, centuries by 400).
constexpr const char* kYear = R"((?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3}))";
constexpr const char* kLeapYear =
    R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00))";
// Month and day together, so each month gets its own number of days.
constexpr const char* kMonthDay =
    R"((?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|)"
    R"(02-(?:0[1-9]|1\d|2[0-8])))";
// Seconds 00-59, at most 6 fraction digits (microseconds), upper-case T and Z: what every
// date-time type and parser takes.
constexpr const char* kTime =
    R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[-+](?:[01]\d|2[0-3]):[0-5]\d))";
// Y M D, then T with H M S; at least one field, each of at most 6 digits (so the total fits
// a timedelta), seconds with at most 6 fraction digits; or weeks.
constexpr const char* kDuration =
    R"(P(?:(?:N+Y(?:N+M)?(?:N+D)?|N+M(?:N+D)?|N+D)(?:T(?:N+H(?:N+M)?(?:N+F?S)?|)"
    R"(N+M(?:N+F?S)?|N+F?S))?|T(?:N+H(?:N+M)?(?:N+F?S)?|N+M(?:N+F?S)?|N+F?S)|N+W))";
constexpr const char* kUuid =
    R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
constexpr const char* kLabel = R"([A-Za-z0-9](?:[A-Za-z0-9-]{0,60}[A-Za-z0-9])?)";
constexpr const char* kPort =
    R"((?:\d{1,4}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d\d|655[0-2]\d|6553[0-5]))";
constexpr const char* kAtext = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-])";
constexpr const char* kOctet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
constexpr const char* kHex4 = R"([0-9a-fA-F]{1,4})";
// RFC 3986 unreserved, sub-delims and %HH.
constexpr const char* kUriChar = R"((?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}))";

std::string ipv6() {
  const std::string h = kHex4;
  return fmt::format(
      "(?:(?:{0}:){{7}}{0}|(?:{0}:){{1,7}}:|(?:{0}:){{1,6}}:{0}|(?:{0}:){{1,5}}(?::{0}){{1,2}}|"
      "(?:{0}:){{1,4}}(?::{0}){{1,3}}|(?:{0}:){{1,3}}(?::{0}){{1,4}}|"
      "(?:{0}:){{1,2}}(?::{0}){{1,5}}|{0}:(?::{0}){{1,6}}|:(?:(?::{0}){{1,7}}|:))",
      h);
}

}  // namespace

std::optional<std::string> string_format_regex(const std::string& format) {
  std::string body;
  const std::string date = fmt::format("(?:{}-{}|{}-02-29)", kYear, kMonthDay, kLeapYear);
  if (format == "date") {
    body = date;
  } else if (format == "time") {
    body = kTime;
  } else if (format == "date-time") {
    body = fmt::format("{}T{}", date, kTime);
  } else if (format == "duration") {
    body = kDuration;
    for (size_t at; (at = body.find("N+")) != std::string::npos;) body.replace(at, 2, "\\d{1,6}");
    for (size_t at; (at = body.find("F?")) != std::string::npos;)
      body.replace(at, 2, "(?:\\.\\d{1,6})?");
  } else if (format == "uuid") {
    body = kUuid;
  } else if (format == "email") {
    // At most 64 characters before the @ and 254 in all (RFC 5321's limits).
    body = fmt::format(R"({0}{{1,32}}(?:\.{0}{{1,31}})?@(?:{1}\.){{1,2}}[A-Za-z]{{2,63}})", kAtext,
                       kLabel);
  } else if (format == "hostname") {
    body = fmt::format(R"({0}(?:\.{0}){{0,3}})", kLabel);  // at most 251 characters
  } else if (format == "ipv4") {
    body = fmt::format(R"((?:{0}\.){{3}}{0})", kOctet);
  } else if (format == "ipv6") {
    body = ipv6();
  } else if (format == "uri") {
    // The path, query and fragment are each one flat repetition, so a maxLength caps them
    // alike; the host is up to 4 LDH labels or a bracketed IPv6 address; no user info. Labels
    // and the scheme have no length limit (URL parsers set none): a counted repetition costs
    // the matcher a context per count, and only a maxLength needs them.
    const std::string pchar = fmt::format("(?:{}|[:@/])", kUriChar);
    body = fmt::format(R"([A-Za-z][A-Za-z0-9+.\-]*://(?:(?:{0}\.){{0,3}}{1}|\[{2}\])(?::{3})?)"
                       R"((?:/{4}*)?(?:\?(?:{4}|\?)*)?(?:#(?:{4}|\?)*)?)",
                       "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?",
                       "[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?", ipv6(), kPort, pchar);
  } else {
    return std::nullopt;
  }
  return "^(?:" + body + ")$";
}

const char* string_format_names() {
  return "date, time, date-time, duration, uuid, email, hostname, ipv4, ipv6, uri";
}

}  // namespace pith::server
