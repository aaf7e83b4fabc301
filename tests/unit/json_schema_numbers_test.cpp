// Bounds on JSON Schema `number`s (minimum, maximum, exclusive forms; json_schema_scalars.cpp)
// through the schema converter and the SDK's grammar matcher. The oracle is exact decimal
// arithmetic: values scaled by 10^20 in 128-bit integers. Random bounds (signs, fractions,
// exclusive or not, one side or both) against random numbers, their neighbours and the bounds
// themselves: the grammar accepts a number iff it is written without exponent, with at most
// the allowed fraction digits, and lies in range; numbers the grammar generates all lie in
// range and parse as doubles the same way.
#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "json_schema_test_support.h"
#include "server/json_schema_grammar.h"

namespace {

using Json = nlohmann::ordered_json;
using pith::TokenTrie;
using pith::grammar::Automaton;
using pith::grammar::Grammar;
using pith::grammar::Matcher;
using pith::server::json_schema_to_gbnf;
using pith::server::testing::ByteGrammar;

struct Compiled : ByteGrammar {
  explicit Compiled(const Json& schema) : ByteGrammar(schema) {}
  bool accepts(const std::string& doc) const { return accepts_text(doc); }
  std::optional<std::string> walk(std::mt19937& rng) const {
    return ByteGrammar::walk(rng, 60, true);
  }
};

using Fixed = __int128;  // value * 10^20
constexpr int kScale = 20;

// The exact value of a JSON number without exponent, or nullopt (exponent, bad syntax).
std::optional<Fixed> fixed_of(const std::string& s, size_t* fraction_digits) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && s[i] == '-') neg = true, ++i;
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return std::nullopt;
  if (s[i] == '0' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') return std::nullopt;
  // Integer parts beyond 17 digits saturate at 10^17: above every bound here, and no overflow.
  Fixed whole = 0;
  const Fixed kHuge = static_cast<Fixed>(100000000000000000LL);
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i)
    whole = std::min(whole * 10 + (s[i] - '0'), kHuge);
  Fixed frac = 0;
  size_t nf = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++nf)
      if (nf < kScale) frac = frac * 10 + (s[i] - '0');
    if (nf == 0 || nf > kScale) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  for (size_t k = nf; k < kScale; ++k) frac *= 10;
  Fixed scale = 1;
  for (int k = 0; k < kScale; ++k) scale *= 10;
  *fraction_digits = nf;
  const Fixed v = whole * scale + frac;
  return neg ? -v : v;
}

// A random decimal text: sign, up to `whole` integer digits, up to `frac` fraction digits.
std::string random_decimal(std::mt19937& rng, int whole, int frac) {
  std::string s = rng() % 3 == 0 ? "-" : "";
  const int w = static_cast<int>(rng() % (whole + 1));
  if (w == 0) {
    s += "0";
  } else {
    s += static_cast<char>('1' + rng() % 9);
    for (int k = 1; k < w; ++k) s += static_cast<char>('0' + rng() % 10);
  }
  const int f = static_cast<int>(rng() % (frac + 1));
  if (f > 0) {
    s += ".";
    for (int k = 0; k < f; ++k) s += static_cast<char>('0' + rng() % 10);
  }
  return s == "-0" ? "0" : s;
}

struct Bounds {
  std::optional<std::string> lo, hi;
  bool lo_excl = false, hi_excl = false;
};

TEST(JsonSchemaNumbers, BoundsAgreeWithExactDecimals) {
  std::mt19937 rng(29);
  int inside = 0, outside = 0, walked = 0;
  for (int round = 0; round < 120; ++round) {
    Bounds b;
    const int sides = static_cast<int>(rng() % 3);  // 0 both, 1 lower only, 2 upper only
    if (sides != 2) b.lo = random_decimal(rng, 3, 3);
    if (sides != 1) b.hi = random_decimal(rng, 3, 3);
    b.lo_excl = rng() % 2, b.hi_excl = rng() % 2;
    size_t nf = 0;
    if (b.lo && b.hi && *fixed_of(*b.lo, &nf) > *fixed_of(*b.hi, &nf)) std::swap(b.lo, b.hi);
    Json schema = {{"type", "number"}};
    if (b.lo) schema[b.lo_excl ? "exclusiveMinimum" : "minimum"] = Json::parse(*b.lo);
    if (b.hi) schema[b.hi_excl ? "exclusiveMaximum" : "maximum"] = Json::parse(*b.hi);
    std::optional<Fixed> lo, hi;
    if (b.lo) lo = fixed_of(*b.lo, &nf);
    if (b.hi) hi = fixed_of(*b.hi, &nf);
    auto in_range = [&](Fixed v) {
      return (!lo || (b.lo_excl ? v > *lo : v >= *lo)) && (!hi || (b.hi_excl ? v < *hi : v <= *hi));
    };
    const bool empty = lo && hi && (*lo > *hi || (*lo == *hi && (b.lo_excl || b.hi_excl)));
    SCOPED_TRACE(schema.dump());
    if (empty) {
      EXPECT_THROW(json_schema_to_gbnf(schema), pith::Error);
      continue;
    }
    const Compiled c(schema);
    std::vector<std::string> candidates;
    for (const auto& bound : {b.lo, b.hi}) {
      if (!bound) continue;
      candidates.push_back(*bound);
      candidates.push_back(*bound + (bound->find('.') == std::string::npos ? ".0" : "0"));
      candidates.push_back(*bound + (bound->find('.') == std::string::npos ? ".001" : "001"));
      candidates.push_back(*bound + (bound->find('.') == std::string::npos ? ".999" : "999"));
    }
    for (int k = 0; k < 60; ++k) candidates.push_back(random_decimal(rng, 4, 5));
    for (const char* long_fraction : {"0.1234567890123", "0.12345678901234", "0.123456789012345",
                                      "-0.0000000000001", "1.0000000000001"})
      candidates.push_back(long_fraction);
    size_t whole_digits = 1;
    for (const auto& bound : {b.lo, b.hi})
      if (bound)
        whole_digits = std::max(whole_digits, bound->find_first_of(".") == std::string::npos
                                                  ? bound->size() - (bound->at(0) == '-')
                                                  : bound->find('.') - (bound->at(0) == '-'));
    const size_t max_fraction = 15 - whole_digits;
    for (const char* odd : {"-0", "0", "-0.0", "1e2", "01", "1.", ".5", "-", "0.0000000000000001"})
      candidates.push_back(odd);
    for (const std::string& x : candidates) {
      size_t digits = 0;
      const std::optional<Fixed> v = fixed_of(x, &digits);
      // At most 15 significant digits: 15 minus the larger bound's integer digits may follow
      // the point; zero is written without a sign.
      const bool expected =
          v && digits <= max_fraction && in_range(*v) && !(*v == 0 && x[0] == '-');
      ASSERT_EQ(c.accepts(x), expected) << x << "\n" << c.gbnf;
      (expected ? inside : outside)++;
    }
    for (int k = 0; k < 10; ++k) {
      const std::optional<std::string> doc = c.walk(rng);
      if (!doc) continue;
      size_t digits = 0;
      const std::optional<Fixed> v = fixed_of(*doc, &digits);
      ASSERT_TRUE(v && in_range(*v)) << "generated " << *doc << "\n" << c.gbnf;
      // As a double it keeps the same side of the bounds (15 significant digits at most).
      const double d = std::strtod(doc->c_str(), nullptr);
      if (lo) {
        const double l = std::strtod(b.lo->c_str(), nullptr);
        EXPECT_TRUE(b.lo_excl ? d > l : d >= l) << *doc;
      }
      if (hi) {
        const double h = std::strtod(b.hi->c_str(), nullptr);
        EXPECT_TRUE(b.hi_excl ? d < h : d <= h) << *doc;
      }
      ++walked;
    }
  }
  EXPECT_GT(inside, 500);
  EXPECT_GT(outside, 2000);
  EXPECT_GT(walked, 500);
}

// Pydantic's float constraints as model_json_schema() writes them.
TEST(JsonSchemaNumbers, PydanticFloatFields) {
  const Compiled probability(Json::parse(R"({"type": "number", "minimum": 0.0, "maximum": 1.0})"));
  for (const char* x : {"0", "1", "0.5", "0.0", "1.0", "0.12345678901234", "1.00"})
    EXPECT_TRUE(probability.accepts(x)) << x;
  for (const char* x : {"-0.1", "1.01", "2", "1e-3", "0.123456789012345", "-1"})
    EXPECT_FALSE(probability.accepts(x)) << x;
  const Compiled positive(Json::parse(R"({"type": "number", "exclusiveMinimum": 0})"));
  for (const char* x : {"0.001", "5", "123456789.5"}) EXPECT_TRUE(positive.accepts(x)) << x;
  for (const char* x : {"0", "0.0", "-0.5", "-3"}) EXPECT_FALSE(positive.accepts(x)) << x;
  const Compiled price(
      Json::parse(R"({"type": "number", "minimum": 0.01, "exclusiveMaximum": 1e4})"));
  for (const char* x : {"0.01", "9999.99", "10"}) EXPECT_TRUE(price.accepts(x)) << x;
  for (const char* x : {"0.009", "10000", "10000.0", "0"}) EXPECT_FALSE(price.accepts(x)) << x;
  const Compiled tiny(Json::parse(R"({"type": "number", "minimum": -1e-5, "maximum": 2.5e-5})"));
  for (const char* x : {"0", "-0.00001", "0.000025", "0.00000001"})
    EXPECT_TRUE(tiny.accepts(x)) << x;
  for (const char* x : {"-0.000011", "0.0000251"}) EXPECT_FALSE(tiny.accepts(x)) << x;
  // Inside an object and beside null (Optional[confloat]).
  const Compiled obj(Json::parse(R"({"type": "object", "properties": {"score": {"anyOf": [
      {"type": "number", "minimum": -1, "maximum": 1}, {"type": "null"}]}}, "required": ["score"]})"));
  EXPECT_TRUE(obj.accepts(R"({"score": -0.25})"));
  EXPECT_TRUE(obj.accepts(R"({"score": null})"));
  EXPECT_FALSE(obj.accepts(R"({"score": 1.5})"));
}

// multipleOf (json_schema_multiple_of.cpp) against exact decimals: random steps (integers up to
// 1000, decimal steps such as 0.01, 0.25, 2.5, 0.125), integer or number, with or without a
// bound at 0 (a sign); a text is accepted iff it is written without exponent, with at most the
// step's fraction digits (none for integers), and is a whole multiple of the step with the sign
// allowed. Zero's spellings other than "0" are left out of the comparison (the grammar writes 0
// as "0" where a sign is imposed). Random walks of the grammar are multiples too.
TEST(JsonSchemaNumbers, MultipleOfAgreesWithExactDecimals) {
  std::mt19937 rng(31);
  const char* const kDecimalSteps[] = {"0.01",  "0.25", "2.5", "0.125", "0.5", "1.5",
                                       "0.001", "0.2",  "7.5", "12",    "0.05"};
  const char* const kSigns[] = {"", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
  int inside = 0, outside = 0, walked = 0;
  // (Steps near 1000 give 1000-rule grammars, slow to walk under ASan: three rounds only.)
  for (int round = 0; round < 60; ++round) {
    const std::string step = round % 2 ? kDecimalSteps[rng() % std::size(kDecimalSteps)]
                                       : std::to_string(1 + rng() % (round % 20 ? 40 : 1000));
    const bool integer = rng() % 3 == 0;
    const std::string bound = kSigns[rng() % std::size(kSigns)];
    Json schema = {{"type", integer ? "integer" : "number"}, {"multipleOf", Json::parse(step)}};
    if (!bound.empty()) schema[bound] = 0;
    SCOPED_TRACE(schema.dump());
    const Compiled c(schema);
    size_t step_digits = 0;
    const Fixed unit = *fixed_of(step, &step_digits);
    const size_t max_fraction = integer ? 0 : step_digits;
    const int sign = bound.find("inimum") != std::string::npos ? 1 : bound.empty() ? 0 : -1;
    const bool zero = bound.rfind("exclusive", 0) != 0;
    auto allowed = [&](Fixed v) {
      return v % unit == 0 && (sign == 0 || (sign > 0 ? v >= 0 : v <= 0)) && (zero || v != 0);
    };
    std::vector<std::string> candidates;
    for (int k = 0; k < 60; ++k) candidates.push_back(random_decimal(rng, 4, 4));
    for (int k = 1; k < 8; ++k) {  // multiples and their neighbours, both signs
      const long long n = static_cast<long long>(rng() % 2000) - 1000;
      const std::string m = step.find('.') == std::string::npos
                                ? std::to_string(n * std::stoll(step))
                                : fmt::format("{:.{}f}", n * std::stod(step), step_digits);
      for (const std::string& x : {m, m + (m.find('.') == std::string::npos ? ".5" : "1")})
        candidates.push_back(x);
    }
    for (const char* odd : {"0", "1e2", "01", "1.", "-", "10", "-10", "100"})
      candidates.push_back(odd);
    for (const std::string& x : candidates) {
      size_t digits = 0;
      const std::optional<Fixed> v = fixed_of(x, &digits);
      if (v && *v == 0 && x != "0") continue;
      const bool expected = v && digits <= max_fraction && allowed(*v);
      ASSERT_EQ(c.accepts(x), expected) << x << "\n" << c.gbnf;
      (expected ? inside : outside)++;
    }
    // Walks may write long integer parts: checked digit by digit (N mod M, the step's digits
    // as the integer M and N the document's digits scaled alike).
    std::string step_int = step;
    step_int.erase(std::remove(step_int.begin(), step_int.end(), '.'), step_int.end());
    const long long m = std::stoll(step_int);
    for (int k = 0; k < 8; ++k) {
      const std::optional<std::string> doc = c.walk(rng);
      if (!doc) continue;
      const bool negative = (*doc)[0] == '-';
      std::string digits = doc->substr(negative ? 1 : 0);
      const size_t point = digits.find('.');
      const size_t fraction = point == std::string::npos ? 0 : digits.size() - point - 1;
      if (point != std::string::npos) digits.erase(point, 1);
      digits.append(step_digits - std::min(step_digits, fraction), '0');
      long long rem = 0;
      bool nonzero = false;
      for (char ch : digits) rem = (rem * 10 + (ch - '0')) % m, nonzero |= ch != '0';
      ASSERT_TRUE(fraction <= max_fraction && rem == 0 && (zero || nonzero) &&
                  (sign == 0 || !nonzero || (sign > 0) != negative))
          << "generated " << *doc;
      ++walked;
    }
  }
  EXPECT_GT(inside, 300);
  EXPECT_GT(outside, 2000);
  EXPECT_GT(walked, 300);
}

// Pydantic's conint(multiple_of=5, ge=0), condecimal-like prices, and what stays a 400.
TEST(JsonSchemaNumbers, MultipleOfFieldsAndRefusals) {
  const Compiled fives(Json::parse(R"({"type": "integer", "multipleOf": 5, "minimum": 0})"));
  for (const char* x : {"0", "5", "1230"}) EXPECT_TRUE(fives.accepts(x)) << x;
  for (const char* x : {"-5", "7", "5.0", "05"}) EXPECT_FALSE(fives.accepts(x)) << x;
  const Compiled cents(Json::parse(R"({"type": "number", "multipleOf": 0.01})"));
  for (const char* x : {"19.99", "-0.5", "3", "0.07"}) EXPECT_TRUE(cents.accepts(x)) << x;
  for (const char* x : {"19.999", "1e2", "0.001"}) EXPECT_FALSE(cents.accepts(x)) << x;
  const Compiled positive(
      Json::parse(R"({"type": "number", "multipleOf": 0.25, "exclusiveMinimum": 0})"));
  for (const char* x : {"0.25", "0.5", "1.75", "2"}) EXPECT_TRUE(positive.accepts(x)) << x;
  for (const char* x : {"0", "0.0", "0.1", "-0.25"}) EXPECT_FALSE(positive.accepts(x)) << x;
  using pith::server::testing::error_of;
  EXPECT_NE(error_of(Json::parse(R"({"type": "integer", "multipleOf": 5, "minimum": 10})"))
                .find("keyword 'minimum'"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"type": "number", "multipleOf": 0.0001234})"))
                .find("keyword 'multipleOf'"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"type": "number", "multipleOf": 0})")).find("multipleOf"),
            std::string::npos);
}

}  // namespace
