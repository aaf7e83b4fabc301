// JSON Schema `pattern` and the regular `format`s (src/server/json_schema_pattern.cpp) through
// the schema converter and the SDK's grammar matcher. The oracle for ASCII patterns is
// std::regex in ECMAScript mode (regex_search: JSON Schema patterns are unanchored): on each
// pattern's examples, their one-character mutations and random strings, the grammar accepts a
// string's JSON text exactly when std::regex finds the pattern in it, and strings the grammar
// generates (random walks over its byte mask) all match. IP formats are checked with
// inet_pton.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

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
using pith::server::testing::error_of;

// A string schema's grammar; accepts() takes the string, not its JSON text.
struct StringSchema : ByteGrammar {
  explicit StringSchema(const Json& schema) : ByteGrammar(schema) {}
  bool accepts(const std::string& s) const { return accepts_text(Json(s).dump()); }
  std::optional<std::string> walk(std::mt19937& rng) const {
    return ByteGrammar::walk(rng, 400, false);
  }
};

Json pattern_schema(const std::string& pattern) {
  return Json{{"type", "string"}, {"pattern", pattern}};
}

struct Case {
  const char* pattern;
  std::vector<std::string> examples;  // strings to mutate (matching or not)
};

const std::vector<Case>& ascii_cases() {
  static const std::vector<Case> cases = {
      {R"(^\d{3}-\d{4}$)", {"555-1234", "55-1234"}},
      {R"(^[A-Z]{2}\d{6}$)", {"AB123456"}},
      {R"(^[a-z0-9_-]+$)", {"user_name-1", ""}},
      {R"(^https?://[^\s/$.?#].[^\s]*$)", {"https://example.com/x?y=1", "http://a.b"}},
      {R"(^[\w.+-]+@[\w-]+\.[\w.-]+$)", {"a.b+c@ex-ample.co.uk"}},
      {"abc", {"xxabcxx", "abc", "ab"}},
      {"^ab|cd$", {"abz", "zcd", "zab"}},
      {"^(?:a|bc)*d?$", {"abcad", "bcbc", "cb"}},
      {"^(foo|bar){2,3}$", {"foobarfoo", "foo", "barbar"}},
      {R"(^[^aeiou\s]+$)", {"xyz", "x z"}},
      {R"(^\(\d{3}\) \d{3}-\d{4}$)", {"(555) 123-4567"}},
      {R"(^[\x41-\x43]\u0044\t?$)", {"AD", "CD\t", "DD"}},
      {R"(^"[^"\\]*"$)", {"\"hi\"", "\"a\\b\""}},
      {"^a{2,}b{0,2}c?$", {"aabbc", "abbc", "aaaaa"}},
      {"x*?y+?", {"xxy", "yy", "x"}},
      {R"(^[\d\-.]+$)", {"1-2.3", "1_2"}},
      {"^[-a]$", {"-", "a"}},
      {"^[a-]$", {"-", "a"}},
      {R"(^\.\*\+\?\(\)\[\]\{\}\|\^\$\/\\$)", {R"(.*+?()[]{}|^$/\)"}},
      {"", {"", "anything"}},
      {"^$", {"", "a"}},
      {R"(^[\s\S]{2}$)", {"ab", "\n\t", "abc"}},
      {"^.{1,3}$", {"ab", "a\nb", "abcd"}},
      {"^(a|)+$", {"aaa", ""}},
      {"^(a*b?)*c$", {"aabbc", "c", "ca"}},
      {"^(?:(a)|b)(c|d)?$", {"ac", "b", "bd", "ad"}},
      {R"(^\d+(\.\d{1,2})?$)", {"12.34", "1.", "0.123"}},
      {R"(\s{2,}|\t)", {"a  b", "a b", "\t"}},
      {"^a{1,2}|b{3}$", {"aa", "bbb", "abbb"}},
  };
  return cases;
}

std::vector<std::string> candidates(const Case& c, std::mt19937& rng) {
  std::string alphabet = "ab09 _-.\"\\\n\tZ(){}[]";
  for (const char* p = c.pattern; *p; ++p)
    if (static_cast<unsigned char>(*p) < 0x80 && alphabet.find(*p) == std::string::npos)
      alphabet += *p;
  std::vector<std::string> out;
  for (const std::string& e : c.examples) {
    out.push_back(e);
    for (size_t i = 0; i <= e.size(); ++i) {
      for (int k = 0; k < 3; ++k) {
        const char x = alphabet[rng() % alphabet.size()];
        out.push_back(e.substr(0, i) + x + e.substr(i));                        // insert
        if (i < e.size()) out.push_back(e.substr(0, i) + x + e.substr(i + 1));  // replace
      }
      if (i < e.size()) out.push_back(e.substr(0, i) + e.substr(i + 1));  // delete
    }
  }
  for (int k = 0; k < 200; ++k) {
    std::string s;
    for (size_t len = rng() % 9; s.size() < len;) s += alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

TEST(JsonSchemaPattern, AgreesWithEcmaScriptRegex) {
  std::mt19937 rng(7);
  int matched = 0, unmatched = 0, walked = 0;
  for (const Case& c : ascii_cases()) {
    SCOPED_TRACE(c.pattern);
    const std::regex oracle(c.pattern, std::regex::ECMAScript);
    const StringSchema schema(pattern_schema(c.pattern));
    for (const std::string& s : candidates(c, rng)) {
      const bool expected = std::regex_search(s, oracle);
      ASSERT_EQ(schema.accepts(s), expected) << "'" << s << "'\n" << schema.gbnf;
      (expected ? matched : unmatched)++;
    }
    for (int k = 0; k < 40; ++k) {
      const std::optional<std::string> doc = schema.walk(rng);
      if (!doc) continue;
      const std::string s = Json::parse(*doc).get<std::string>();
      ASSERT_TRUE(std::regex_search(s, oracle)) << "generated " << *doc << "\n" << schema.gbnf;
      ++walked;
    }
  }
  EXPECT_GT(matched, 500);
  EXPECT_GT(unmatched, 2000);
  EXPECT_GT(walked, 600);
}

TEST(JsonSchemaPattern, NonAsciiEscapesAndJsonSpelling) {
  const StringSchema accent(pattern_schema("^é+\\u00e8$"));
  EXPECT_TRUE(accent.accepts("ééè"));
  EXPECT_FALSE(accent.accepts("eè"));
  EXPECT_FALSE(accent.accepts_text("\"\\u00e9\\u00e8\""));  // one spelling: the character itself
  const StringSchema not_a(pattern_schema("^[^a]$"));
  for (const char* s : {"é", "\"", "\\", "\n", "\x01", "\x1F", "😀", "\x7F"})
    EXPECT_TRUE(not_a.accepts(s)) << Json(s).dump() << "\n" << not_a.gbnf;
  EXPECT_FALSE(not_a.accepts("a"));
  EXPECT_FALSE(not_a.accepts_text("\"\x01\""));  // a raw control character is not JSON
  const StringSchema emoji(pattern_schema(R"(^\u{1F600}\uD83D\uDE01[\u{1F602}-\u{1F604}]$)"));
  EXPECT_TRUE(emoji.accepts("😀😁😃"));
  EXPECT_FALSE(emoji.accepts("😀😁😅"));
  const StringSchema control(pattern_schema(R"(^\x01\f\v$)"));
  EXPECT_TRUE(control.accepts_text(R"("\u0001\f\u000b")"));
  EXPECT_TRUE(control.accepts_text(R"("\u0001\f\u000B")"));
  const StringSchema named(pattern_schema(R"(^(?<year>\d{4})-(?<month>\d\d)$)"));
  EXPECT_TRUE(named.accepts("2024-06"));
  EXPECT_FALSE(named.accepts("2024-6"));
  const StringSchema brace(pattern_schema("^a{,2}}$"));  // Annex B: a '{' that counts nothing
  EXPECT_TRUE(brace.accepts("a{,2}}"));
  EXPECT_FALSE(brace.accepts("aa"));
  const StringSchema controls(pattern_schema(R"(^[\b]\cJ\0?[^]$)"));  // [^]: any character
  EXPECT_TRUE(controls.accepts_text(R"("\b\n\u0000\"")"));
  EXPECT_TRUE(controls.accepts_text(R"("\b\n\n")"));
  EXPECT_FALSE(controls.accepts_text(R"("\b\n")"));
  const StringSchema space(pattern_schema(R"(^\s$)"));
  for (const char* s : {" ", "\t", "\u00a0", "\u2028", "\u3000", "\ufeff"})
    EXPECT_TRUE(space.accepts(s)) << s;
  const StringSchema dot(pattern_schema("^.$"));
  for (const char* s : {"\n", "\r", "\u2028", "\u2029"}) EXPECT_FALSE(dot.accepts(s)) << s;
  EXPECT_TRUE(dot.accepts("\u2027"));
}

TEST(JsonSchemaPattern, UnsupportedAndMalformedPatternsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"a(?=b)", "is not supported here: lookahead assertions ('a(?=b)')"},
      {"(?<!a)b", "lookbehind assertions"},
      {R"((a)\1)", "backreferences"},
      {R"((?<x>a)\k<x>)", "backreferences"},
      {R"(\bword)", "word boundaries"},
      {R"(\p{L}+)", "Unicode property escapes"},
      {"a^b", "'^' anchors only the start"},
      {"(^a)", "'^' anchors only the start"},
      {"a$b", "'$' anchors only the end"},
      {"a{1001}", "counts above 1000"},
      {R"(\01)", "octal escapes"},
      {"(ab", "keyword 'pattern' at (root) ('(ab'): a '(' is not closed"},
      {"ab)", "an unmatched ')'"},
      {"[ab", "a '[' is not closed"},
      {"a**", "a quantifier follows a quantifier"},
      {"*a", "'*' has nothing to repeat"},
      {"{2}", "a count has nothing to repeat"},
      {"[z-a]", "a class range is out of order"},
      {"a{3,2}", "the count {3,2} is out of order"},
      {"(?x)", "'(?' starts no known group"},
      {"[]", "a class in it matches no character"},
      {R"(\c1)", "'\\c' needs a letter"},
      {R"(\u{110000})", "a bad '\\u{...}' escape"},
  };
  for (const auto& [pattern, expect] : cases) {
    const std::string err = error_of(pattern_schema(pattern));
    EXPECT_NE(err.find(expect), std::string::npos) << pattern << "\nerror: " << err;
  }
  const std::string nested =
      error_of(Json::parse(R"j({"properties": {"a": {"type": "string", "pattern": "(?=x)"}}})j"));
  EXPECT_NE(nested.find("keyword 'pattern' at /properties/a is not supported"), std::string::npos)
      << nested;
  EXPECT_NE(error_of(Json::parse(R"({"pattern": 5})")).find("must be a string"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"pattern": "a", "format": "date"})"))
                .find("keyword 'format' at (root) is not supported beside 'pattern'"),
            std::string::npos);
}

// Any pattern text compiles or is refused with a pith::Error: no crash, no runaway grammar.
TEST(JsonSchemaPattern, RandomPatternTextIsCompiledOrRefused) {
  const std::string pieces[] = {"(",    ")",     "(?:",  "|", "*",       "+",     "?",
                                "{2}",  "{1,3}", "{2,}", "[", "]",       "^",     "$",
                                "-",    "\\",    "a",    "b", ".",       "\\d",   "\\w",
                                "[^a]", "é",     "{",    "}", "\\u0041", "(?<n>", "\\1"};
  std::mt19937 rng(5);
  int compiled = 0, refused = 0;
  for (int k = 0; k < 3000; ++k) {
    std::string pattern;
    for (size_t n = 1 + rng() % 10; n > 0; --n) pattern += pieces[rng() % std::size(pieces)];
    try {
      json_schema_to_gbnf(pattern_schema(pattern));
      ++compiled;
    } catch (const pith::Error&) {
      ++refused;
    }
  }
  EXPECT_GT(compiled, 300);
  EXPECT_GT(refused, 300);
  const std::string deep = error_of(pattern_schema(std::string(100, '(') + std::string(100, ')')));
  EXPECT_NE(deep.find("groups nested more than 64 deep"), std::string::npos) << deep;
  // Nested counts stay rules that refer to each other: a small grammar.
  EXPECT_LT(json_schema_to_gbnf(pattern_schema("^(a{1000}b){1000}$")).gbnf.size(), 2000u);
}

// All strings over `alphabet` up to max_len characters.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, len = 0; len < max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

TEST(JsonSchemaPattern, LengthBoundsBesideAPattern) {
  struct Bounded {
    const char* pattern;
    uint64_t lo, hi;
    bool exact;  // else: a non-empty subset of the matches within the bounds
  };
  const Bounded cases[] = {
      {"^[a-c]+$", 3, 5, true}, {R"(^\d{2}-[abc]*$)", 5, 6, true}, {"^(ab|c)*$|^b$", 2, 4, false},
      {"abc", 5, 1000, false},  {"^(ab|c)+$", 0, 5, false},        {"^a(bc){0,3}$", 3, 5, true},
      {"^(a|bc)$", 1, 2, true},  // already within the bounds
  };
  for (const Bounded& c : cases) {
    SCOPED_TRACE(c.pattern);
    Json schema = pattern_schema(c.pattern);
    schema["minLength"] = c.lo;
    schema["maxLength"] = c.hi;
    const StringSchema s(schema);
    const std::regex oracle(c.pattern, std::regex::ECMAScript);
    int accepted = 0;
    for (const std::string& x : all_strings("abc0-", 6)) {
      const bool in = std::regex_search(x, oracle) && x.size() >= c.lo && x.size() <= c.hi;
      if (c.exact) {
        ASSERT_EQ(s.accepts(x), in) << x << "\n" << s.gbnf;
      } else if (s.accepts(x)) {
        ASSERT_TRUE(in) << x << "\n" << s.gbnf;
      }
      accepted += s.accepts(x);
    }
    EXPECT_GT(accepted, 0);
  }
  // Refused: bounds that neither follow from the pattern nor can be enforced on it.
  const std::string min_err =
      error_of(Json::parse(R"({"pattern": "^(a|bb)(c|dd)$", "minLength": 4})"));
  EXPECT_NE(min_err.find("minLength 4 beside this pattern"), std::string::npos) << min_err;
  const std::string max_err =
      error_of(Json::parse(R"({"pattern": "^(a|bbbb)c*$", "maxLength": 3})"));
  EXPECT_NE(max_err.find("maxLength 3 beside this pattern"), std::string::npos) << max_err;
  const std::string none = error_of(Json::parse(R"({"pattern": "^\\d{4}$", "maxLength": 3})"));
  EXPECT_NE(none.find("no string matches it with a length from 0 to 3"), std::string::npos) << none;
  // Pydantic's HttpUrl: a format with bounds far above what the grammar repeats.
  const StringSchema url(
      Json::parse(R"({"type": "string", "format": "uri", "minLength": 1, "maxLength": 2083})"));
  EXPECT_TRUE(url.accepts("https://docs.example.com:8443/a/b%20c/d.html?q=1&r=a/b#top"));
  EXPECT_FALSE(url.accepts("https://" + std::string(2100, 'a') + ".com"));
}

TEST(JsonSchemaPattern, Formats) {
  auto format = [](const char* f) { return StringSchema(Json{{"type", "string"}, {"format", f}}); };
  const StringSchema email = format("email");
  for (const char* s : {"a@b.co", "first.last+tag@mail.example.org", "x_y-z@sub-1.ex.io"})
    EXPECT_TRUE(email.accepts(s)) << s;
  for (const char* s : {"a@b", "@b.co", "a..b@c.de", "a@-b.co", "a b@c.de", "a@b.c0", "a@b.c"})
    EXPECT_FALSE(email.accepts(s)) << s;
  EXPECT_FALSE(email.accepts(std::string(65, 'a') + "@b.co"));
  const StringSchema host = format("hostname");
  for (const char* s : {"localhost", "a-b.example.com", "x1.y2"}) EXPECT_TRUE(host.accepts(s)) << s;
  for (const char* s : {"-a.com", "a-.com", "a..b", "a_b.com", "a.b.c.d.e", ""})
    EXPECT_FALSE(host.accepts(s)) << s;
  const StringSchema duration = format("duration");
  for (const char* s : {"P1Y2M3DT4H5M6S", "PT0.5S", "P2W", "P1D", "PT36H", "P1MT1M"})
    EXPECT_TRUE(duration.accepts(s)) << s;
  for (const char* s : {"P", "PT", "P1H", "1D", "P1DT", "P1.5Y", "P1W2D"})
    EXPECT_FALSE(duration.accepts(s)) << s;
  const StringSchema uri = format("uri");
  for (const char* s : {"https://example.com", "ftp://[::1]:21/x", "urn://a", "http://a.b/?q#f"})
    EXPECT_TRUE(uri.accepts(s)) << s;
  for (const char* s : {"example.com", "http//a", "http://a b", "http://a/%zz", "1http://a",
                        "http://a.999", "http://a:65536"})
    EXPECT_FALSE(uri.accepts(s)) << s;
  EXPECT_TRUE(uri.accepts("http://10.0.0.a:65535/"));
  EXPECT_FALSE(duration.accepts("P1234567D"));
  EXPECT_FALSE(duration.accepts("PT1.1234567S"));

  // Dates: exactly the calendar's (std::chrono), years 0001-9999.
  const StringSchema date = format("date");
  for (int year : {0, 1, 4, 1900, 2000, 2023, 2024, 2100, 2400, 9999}) {
    for (unsigned month = 0; month <= 13; ++month) {
      for (unsigned day = 0; day <= 32; ++day) {
        const std::chrono::year_month_day ymd{std::chrono::year(year), std::chrono::month(month),
                                              std::chrono::day(day)};
        const std::string text = fmt::format("{:04}-{:02}-{:02}", year, month, day);
        ASSERT_EQ(date.accepts(text), ymd.ok() && year >= 1) << text;
      }
    }
  }

  // IP addresses: every generated one parses with inet_pton; known forms are accepted.
  const StringSchema v4 = format("ipv4"), v6 = format("ipv6");
  for (const char* s : {"0.0.0.0", "255.255.255.255", "10.1.20.199"}) EXPECT_TRUE(v4.accepts(s));
  for (const char* s : {"256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"}) EXPECT_FALSE(v4.accepts(s));
  for (const char* s : {"::", "::1", "1::", "fe80::1:2", "2001:db8:0:0:0:0:2:1", "a:b:c:d:e:f:0:1",
                        "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8"})
    EXPECT_TRUE(v6.accepts(s)) << s;
  for (const char* s : {":::", "1::2::3", "1:2:3:4:5:6:7:8:9", "12345::", "g::", "1:2"})
    EXPECT_FALSE(v6.accepts(s)) << s;
  std::mt19937 rng(3);
  int checked = 0;
  for (int k = 0; k < 300; ++k) {
    for (const auto& [schema, family] : {std::pair{&v4, AF_INET}, std::pair{&v6, AF_INET6}}) {
      const std::optional<std::string> doc = schema->walk(rng);
      if (!doc) continue;
      const std::string ip = Json::parse(*doc).get<std::string>();
      unsigned char buf[16];
      ASSERT_EQ(inet_pton(family, ip.c_str(), buf), 1) << ip;
      ++checked;
    }
  }
  EXPECT_GT(checked, 400);
  const std::string err = error_of(Json::parse(R"({"format": "iri"})"));
  EXPECT_NE(err.find("for 'iri' (supported: date, time, date-time, duration, uuid, email"),
            std::string::npos)
      << err;
}

// A Pydantic model with constrained strings (constr(pattern=...), EmailStr, HttpUrl,
// timedelta, IPv4Address) as model_json_schema() writes it.
TEST(JsonSchemaPattern, PydanticConstrainedStrings) {
  const Json schema = Json::parse(R"({
    "properties": {
      "sku": {"pattern": "^[A-Z]{3}-\\d{4}$", "title": "Sku", "type": "string"},
      "slug": {"maxLength": 20, "minLength": 3, "pattern": "^[a-z0-9-]+$", "title": "Slug",
               "type": "string"},
      "contact": {"format": "email", "title": "Contact", "type": "string"},
      "homepage": {"format": "uri", "maxLength": 2083, "minLength": 1, "title": "Homepage",
                   "type": "string"},
      "ttl": {"format": "duration", "title": "Ttl", "type": "string"},
      "ip": {"format": "ipv4", "title": "Ip", "type": "string"},
      "note": {"anyOf": [{"pattern": "^[^<>]*$", "type": "string"}, {"type": "null"}],
               "default": null, "title": "Note"}
    },
    "required": ["sku", "slug", "contact", "homepage", "ttl", "ip"],
    "title": "Listing", "type": "object"})");
  const StringSchema s(schema);
  EXPECT_TRUE(s.accepts_text(
      R"({"sku": "ABC-1234", "slug": "blue-chair", "contact": "sales@shop.example.com",)"
      R"( "homepage": "https://shop.example.com/p/1", "ttl": "PT1H", "ip": "192.168.0.1",)"
      R"( "note": "two \"seats\""})"));
  EXPECT_FALSE(s.accepts_text(
      R"({"sku": "AB-1234", "slug": "blue-chair", "contact": "sales@shop.example.com",)"
      R"( "homepage": "https://shop.example.com", "ttl": "PT1H", "ip": "192.168.0.1"})"));
  EXPECT_FALSE(s.accepts_text(
      R"({"sku": "ABC-1234", "slug": "bc", "contact": "sales@shop.example.com",)"
      R"( "homepage": "https://shop.example.com", "ttl": "PT1H", "ip": "192.168.0.1"})"));
  EXPECT_FALSE(s.accepts_text(
      R"({"sku": "ABC-1234", "slug": "blue-chair", "contact": "sales@shop.example.com",)"
      R"( "homepage": "https://shop.example.com", "ttl": "PT1H", "ip": "192.168.0.1",)"
      R"( "note": "<b>"})"));
}

// Dictionaries with constrained keys and sizes, as Pydantic writes Dict[K, V] (propertyNames
// from a constr or Literal key type, min_length / max_length as minProperties / maxProperties).
TEST(JsonSchemaPattern, DictionaryKeysAndSizes) {
  const StringSchema codes(Json::parse(R"({"type": "object", "additionalProperties":
      {"type": "integer"}, "propertyNames": {"pattern": "^[A-Z]{2}$"}, "minProperties": 1,
      "maxProperties": 3})"));
  for (const char* doc : {R"({"US": 1})", R"({"US": 1, "FR": 2, "DE": 3})"})
    EXPECT_TRUE(codes.accepts_text(doc)) << doc;
  for (const char* doc : {"{}", R"({"us": 1})", R"({"USA": 1})", R"({"US": "x"})",
                          R"({"US": 1, "FR": 2, "DE": 3, "IT": 4})"})
    EXPECT_FALSE(codes.accepts_text(doc)) << doc;
  const StringSchema levels(Json::parse(R"({"additionalProperties": {"type": "number"},
      "propertyNames": {"enum": ["low", "high", 3]}, "maxProperties": 2})"));
  EXPECT_TRUE(levels.accepts_text(R"({"low": 0.5, "high": 2})"));
  EXPECT_TRUE(levels.accepts_text("{}"));
  EXPECT_FALSE(levels.accepts_text(R"({"mid": 1})"));
  EXPECT_FALSE(levels.accepts_text(R"({"3": 1})"));
  EXPECT_FALSE(levels.accepts_text(R"({"low": 1, "high": 2, "low": 3})"));
  // Pydantic's Dict[constr(pattern=...), int] with max_length: patternProperties.
  const StringSchema tags(Json::parse(R"({"type": "object", "maxProperties": 2,
      "patternProperties": {"^[a-z]+$": {"type": "integer"}}})"));
  EXPECT_TRUE(tags.accepts_text(R"({"ab": 1, "c": -2})"));
  EXPECT_FALSE(tags.accepts_text(R"({"Ab": 1})"));
  EXPECT_FALSE(tags.accepts_text(R"({"ab": 1.5})"));
  EXPECT_FALSE(tags.accepts_text(R"({"a": 1, "b": 2, "c": 3})"));
  EXPECT_NE(error_of(Json::parse(R"({"patternProperties": {"^a": {}, "^b": {}}})"))
                .find("but with one pattern"),
            std::string::npos);
  const StringSchema none(Json::parse(R"({"type": "object", "maxProperties": 0})"));
  EXPECT_TRUE(none.accepts_text("{}"));
  EXPECT_FALSE(none.accepts_text(R"({"a": 1})"));
  EXPECT_NE(error_of(Json::parse(R"({"additionalProperties": false, "minProperties": 1})"))
                .find("needs 1 members but admits none"),
            std::string::npos);
}

}  // namespace
