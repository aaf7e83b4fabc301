// response_format JSON Schema -> GBNF (src/server/json_schema_grammar.cpp), checked through the
// SDK's grammar matcher byte by byte: instances of each supported construct are accepted (and
// finish in an accepting state), invalid ones are rejected, unsupported keywords are named in
// the error. A random instance generator and a small validator (the oracle) check that the
// matcher and JSON Schema agree on generated and mutated instances.
#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "common/error.h"
#include "server/json_schema_grammar.h"

namespace {

using Json = nlohmann::ordered_json;
using pith::TokenTrie;
using pith::grammar::Automaton;
using pith::grammar::Grammar;
using pith::grammar::Matcher;
using pith::server::json_schema_to_gbnf;

std::vector<std::string> byte_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  return v;
}

// A schema's grammar over the 256 single-byte tokens: the matcher sees plain strings.
struct Schema {
  explicit Schema(const char* schema_text) : Schema(Json::parse(schema_text)) {}
  explicit Schema(const Json& schema) : gbnf(json_schema_to_gbnf(schema).gbnf), trie(byte_vocab()) {
    std::string err;
    EXPECT_TRUE(Grammar::parse(gbnf, &g, &err)) << err << "\n" << gbnf;
    a = std::make_unique<Automaton>(g, trie);
  }
  bool matches(std::string_view s) const {
    Matcher m(*a);
    return m.accept_bytes(s) && m.is_complete();
  }
  std::string gbnf;
  Grammar g;
  TokenTrie trie;
  std::unique_ptr<Automaton> a;
};

void expect_accepts(const Schema& s, std::initializer_list<const char*> docs) {
  for (const char* d : docs) EXPECT_TRUE(s.matches(d)) << d << "\n" << s.gbnf;
}
void expect_rejects(const Schema& s, std::initializer_list<const char*> docs) {
  for (const char* d : docs) EXPECT_FALSE(s.matches(d)) << d << "\n" << s.gbnf;
}

std::string error_of(const std::string& schema_text) {
  try {
    json_schema_to_gbnf(Json::parse(schema_text));
  } catch (const pith::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << schema_text;
  return "";
}

TEST(JsonSchemaGrammar, PrimitiveTypes) {
  expect_accepts(Schema(R"({"type": "string"})"),
                 {"\"\"", "\"a b\"", "\"\\\"\\\\\\n\\u00e9\"", "\"caf\xC3\xA9\"", " \"x\"\n"});
  expect_rejects(Schema(R"({"type": "string"})"),
                 {"x", "1", "\"\\x\"", "\"a\nb\"", "\"\\u12\"", "\"abc", "null"});
  expect_accepts(Schema(R"({"type": "integer"})"), {"0", "-7", "123456789012"});
  expect_rejects(Schema(R"({"type": "integer"})"), {"1.5", "01", "1e3", "-", "\"1\"", "+1"});
  expect_accepts(Schema(R"({"type": "number"})"), {"0", "-0.5", "1e10", "2.5E-3", "7"});
  expect_rejects(Schema(R"({"type": "number"})"), {".5", "1.", "1e", "NaN", "00"});
  expect_accepts(Schema(R"({"type": "boolean"})"), {"true", "false"});
  expect_rejects(Schema(R"({"type": "boolean"})"), {"1", "null", "True"});
  expect_accepts(Schema(R"({"type": "null"})"), {"null"});
  expect_rejects(Schema(R"({"type": "null"})"), {"{}", "0"});
  Schema list(R"({"type": ["integer", "null", "string"]})");
  expect_accepts(list, {"3", "null", "\"x\""});
  expect_rejects(list, {"1.5", "true", "[]"});
}

TEST(JsonSchemaGrammar, AnyValue) {
  for (const char* text : {"{}", "true", R"({"title": "anything", "description": "d"})"}) {
    Schema any(text);
    expect_accepts(any, {"1", "\"s\"", "null", "{\"a\": [1, {\"b\": false}]}", "[]"});
    expect_rejects(any, {"{", "[1,]", "nul"});
  }
}

TEST(JsonSchemaGrammar, ObjectsRequiredOptionalAndOrder) {
  Schema s(R"({"type": "object", "properties": {
      "id": {"type": "integer"}, "name": {"type": "string"}, "tags": {"type": "array",
      "items": {"type": "string"}}, "score": {"type": "number"}},
      "required": ["id", "tags"], "additionalProperties": false})");
  expect_accepts(
      s, {R"({"id":1,"tags":[]})", R"({"id": 1, "name": "n", "tags": ["a"]})",
          R"({"id":1,"tags":["a","b"],"score":2.5})", R"({"id":1,"name":"x","tags":[],"score":0})",
          "{\n  \"id\": 1,\n  \"tags\": [\n    \"a\"\n  ]\n}"});
  expect_rejects(s, {R"({"tags":[]})", R"({"id":1})", R"({"id":"1","tags":[]})",
                     R"({"id":1,"tags":[],"other":1})", R"({"tags":[],"id":1})",
                     R"({"id":1,"tags":[],})", R"({"id":1,,"tags":[]})", "{}"});
  // All optional: the empty object and any ordered subset.
  Schema opt(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}, "c": {"type": "integer"}}})");
  expect_accepts(
      opt, {"{}", "{ }", R"({"b":2})", R"({"a":1,"c":3})", R"({"c":3})", R"({"a":1,"b":2,"c":3})"});
  expect_rejects(opt, {R"({"c":3,"a":1})", R"({"d":1})", R"({,"a":1})", R"({"a":1,})"});
  // Properties without `type`: an object is inferred.
  expect_accepts(Schema(R"({"properties": {"a": {}}, "required": ["a"]})"), {R"({"a":[null]})"});
  // A property whose schema is false may not appear.
  Schema never(R"({"properties": {"a": false, "b": {"type": "null"}}})");
  expect_accepts(never, {"{}", R"({"b":null})"});
  expect_rejects(never, {R"({"a":1})"});
}

TEST(JsonSchemaGrammar, AdditionalProperties) {
  Schema open(R"({"type": "object", "properties": {"a": {"type": "integer"}},
      "required": ["a"], "additionalProperties": true})");
  expect_accepts(open, {R"({"a":1})", R"({"a":1,"x":[1],"y":{}})"});
  expect_rejects(open, {R"({"x":1})", R"({"x":1,"a":1})"});
  Schema typed(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  expect_accepts(typed, {"{}", R"({"x":1})", R"({"x":1, "y":-2})"});
  expect_rejects(typed, {R"({"x":"1"})", R"({"x":1,})"});
  Schema bare(R"({"type": "object"})");  // no properties, no additionalProperties: any members
  expect_accepts(bare, {"{}", R"({"k":[true]})"});
  Schema closed(R"({"type": "object", "properties": {}, "additionalProperties": false})");
  expect_accepts(closed, {"{}"});
  expect_rejects(closed, {R"({"k":1})"});
  Schema optional_open(R"({"properties": {"a": {"type": "null"}}, "additionalProperties": {}})");
  expect_accepts(optional_open, {"{}", R"({"z":1})", R"({"a":null,"z":1})"});
}

TEST(JsonSchemaGrammar, Arrays) {
  Schema bounded(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2,
      "maxItems": 4})");
  expect_accepts(bounded, {"[1,2]", "[1, 2, 3]", "[ 1 ,2,3,4 ]"});
  expect_rejects(bounded, {"[]", "[1]", "[1,2,3,4,5]", "[1,\"2\"]", "[1,2,]"});
  expect_accepts(Schema(R"({"type": "array"})"), {"[]", "[1, \"a\", {}]"});
  Schema none(R"({"type": "array", "maxItems": 0})");
  expect_accepts(none, {"[]"});
  expect_rejects(none, {"[1]"});
  Schema tuple(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
      "minItems": 1, "items": false})");
  expect_accepts(tuple, {"[1]", "[1,\"a\"]"});
  expect_rejects(tuple, {"[]", "[\"a\"]", "[1,2]", "[1,\"a\",3]"});
  Schema tuple_rest(R"({"prefixItems": [{"type": "string"}], "items": {"type": "null"}})");
  expect_accepts(tuple_rest, {"[]", "[\"a\"]", "[\"a\",null,null]"});
  expect_rejects(tuple_rest, {"[null]", "[\"a\",\"b\"]"});
  Schema old_tuple(R"({"items": [{"type": "boolean"}], "additionalItems": false})");
  expect_accepts(old_tuple, {"[]", "[true]"});
  expect_rejects(old_tuple, {"[true,false]"});
  expect_accepts(Schema(R"({"type": "array", "uniqueItems": false})"), {"[1,1]"});
}

TEST(JsonSchemaGrammar, EnumAndConst) {
  Schema e(R"({"enum": ["red", "gr\"een", 3, null, true, [1, "x"], {"k": {"n": 1}}]})");
  expect_accepts(e, {"\"red\"", "\"gr\\\"een\"", "3", "null", "true", "[1,\"x\"]", "[ 1 , \"x\" ]",
                     "{\"k\":{\"n\":1}}", "{ \"k\" : { \"n\" : 1 } }"});
  expect_rejects(e, {"\"blue\"", "\"Red\"", "4", "false", "[1]", "{\"k\":{}}", "\"gr\"een\""});
  Schema typed(R"({"type": "string", "enum": ["a", "b", 1]})");  // `type` filters the values
  expect_accepts(typed, {"\"a\"", "\"b\""});
  expect_rejects(typed, {"1"});
  Schema c(R"({"const": "fixed", "type": "string", "title": "Kind"})");
  expect_accepts(c, {"\"fixed\""});
  expect_rejects(c, {"\"fixe\"", "\"fixed \""});
  expect_accepts(Schema(R"({"const": {"a": []}})"), {"{\"a\":[]}", "{\"a\": [ ]}"});
}

TEST(JsonSchemaGrammar, StringLength) {
  Schema s(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_accepts(s,
                 {"\"ab\"", "\"abc\"", "\"\\n\\t\"", "\"\xC3\xA9\xE2\x82\xAC\"", "\"\\u00e9x\""});
  expect_rejects(s, {"\"a\"", "\"abcd\"", "\"\"", "\"\\u00e9\""});
}

// Every integer near the bounds is accepted exactly when it lies in the range.
TEST(JsonSchemaGrammar, IntegerRanges) {
  struct Range {
    const char* bounds;
    int64_t lo, hi;  // the expected range (INT64_MIN / INT64_MAX: open)
  };
  const int64_t kOpen = std::numeric_limits<int64_t>::max();
  const Range ranges[] = {
      {R"("minimum": 0, "maximum": 100)", 0, 100},
      {R"("minimum": -5, "maximum": 5)", -5, 5},
      {R"("minimum": 10)", 10, kOpen},
      {R"("maximum": -3)", -kOpen, -3},
      {R"("maximum": 250)", -kOpen, 250},
      {R"("minimum": -250)", -250, kOpen},
      {R"("minimum": 7, "maximum": 7)", 7, 7},
      {R"("exclusiveMinimum": 0, "exclusiveMaximum": 1000)", 1, 999},
      {R"("minimum": 123, "maximum": 4567)", 123, 4567},
      {R"("minimum": -1999, "maximum": -1001)", -1999, -1001},
      {R"("minimum": 0.5, "maximum": 99.5)", 1, 99},
      {R"("exclusiveMinimum": -0.5, "exclusiveMaximum": 20.5)", 0, 20},
      {R"("minimum": 90, "maximum": 110, "exclusiveMaximum": 105)", 90, 104},
  };
  for (const Range& r : ranges) {
    const std::string text = std::string(R"({"type": "integer", )") + r.bounds + "}";
    Schema s(text.c_str());
    for (int64_t v = -2100; v <= 5000; ++v) {
      const bool in = (r.lo == -kOpen || v >= r.lo) && (r.hi == kOpen || v <= r.hi);
      ASSERT_EQ(s.matches(std::to_string(v)), in) << r.bounds << ": " << v << "\n" << s.gbnf;
    }
    for (const char* far : {"123456789012", "-123456789012"}) {
      const int64_t v = std::stoll(far);
      const bool in = (r.lo == -kOpen || v >= r.lo) && (r.hi == kOpen || v <= r.hi);
      EXPECT_EQ(s.matches(far), in) << r.bounds << ": " << far;
    }
    expect_rejects(s, {"-0", "007", "1.0", "1e2", "-"});
  }
  Schema big(R"({"type": "integer", "minimum": -1000000000000000000,
      "maximum": 1000000000000000000})");
  expect_accepts(big, {"0", "-1000000000000000000", "1000000000000000000", "999999999999999999"});
  expect_rejects(big, {"1000000000000000001", "-1000000000000000001", "10000000000000000000"});
}

TEST(JsonSchemaGrammar, StringFormats) {
  Schema date(R"({"type": "string", "format": "date"})");
  expect_accepts(date, {"\"2024-01-31\"", "\"1999-12-01\"", "\"2023-04-30\"", "\"2024-02-29\"",
                        "\"2000-02-29\"", "\"0004-02-29\"", "\"0001-01-01\""});
  expect_rejects(date, {"\"2024-1-31\"", "\"2024-13-01\"", "\"2024-00-10\"", "\"2024-04-31\"",
                        "\"2024-02-30\"", "\"2024-01-00\"", "\"24-01-01\"", "\"2024-01-01T\"",
                        "\"2023-02-29\"", "\"1900-02-29\"", "\"0000-01-01\""});
  Schema time(R"({"format": "time"})");
  expect_accepts(time, {"\"23:59:59Z\"", "\"00:00:00.123456+05:30\"", "\"12:30:00Z\""});
  expect_rejects(time, {"\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:30:00\"", "\"12:30Z\"",
                        "\"23:59:60Z\"", "\"00:00:00.1234567Z\"", "\"12:30:00z\""});
  Schema date_time(R"({"type": "string", "format": "date-time"})");
  expect_accepts(date_time, {"\"2024-06-01T12:00:00Z\"", "\"2024-06-01T12:00:00.5-01:00\""});
  expect_rejects(date_time, {"\"2024-06-01 12:00:00Z\"", "\"2024-06-01\"",
                             "\"2024-06-31T00:00:00Z\"", "\"2024-06-01t12:00:00Z\""});
  Schema uuid(R"({"type": ["string", "null"], "format": "uuid"})");
  expect_accepts(uuid, {"\"123e4567-e89b-12d3-A456-426614174000\"", "null"});
  expect_rejects(
      uuid, {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""});
  // Bounds that every date meets change nothing (more formats: json_schema_pattern_test).
  expect_accepts(Schema(R"({"format": "date", "minLength": 10, "maxLength": 10})"),
                 {"\"2024-02-29\""});
}

TEST(JsonSchemaGrammar, RefsAndRecursion) {
  Schema tree(R"({"$defs": {"Node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array",
      "items": {"$ref": "#/$defs/Node"}}}, "required": ["value", "children"]}},
      "$ref": "#/$defs/Node"})");
  expect_accepts(tree,
                 {R"({"value":1,"children":[]})",
                  R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]},
  {"value":4,"children":[]}]})"});
  expect_rejects(tree, {R"({"value":1})", R"({"value":1,"children":[{"value":2}]})"});
  Schema root_ref(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"},
      {"type": "null"}]}}, "required": ["next"]})");
  expect_accepts(root_ref, {R"({"next":null})", R"({"next":{"next":{"next":null}}})"});
  expect_rejects(root_ref, {R"({"next":{}})"});
  Schema definitions(R"({"definitions": {"a": {"type": "boolean"}},
      "type": "array", "items": {"$ref": "#/definitions/a"}})");
  expect_accepts(definitions, {"[true,false]"});
  expect_rejects(definitions, {"[1]"});
  Schema pointer(R"({"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}})");
  expect_accepts(pointer, {R"({"a":1,"b":2})"});
  expect_rejects(pointer, {R"({"b":"2"})"});
}

TEST(JsonSchemaGrammar, Unions) {
  Schema any(R"({"anyOf": [{"type": "integer"}, {"type": "object", "properties":
      {"x": {"type": "string"}}, "required": ["x"]}], "description": "either"})");
  expect_accepts(any, {"1", R"({"x":"y"})"});
  expect_rejects(any, {"\"1\"", "{}"});
  Schema one(R"({"oneOf": [{"type": "string"}, {"type": "null"}, false]})");
  expect_accepts(one, {"\"s\"", "null"});
  expect_rejects(one, {"0"});
  Schema all(R"({"allOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": {"type": "null"}}})");
  expect_accepts(all, {"null"});
  expect_rejects(all, {"1"});
}

TEST(JsonSchemaGrammar, WhitespaceIsBounded) {
  Schema s(R"({"type": "array", "items": {"type": "integer"}})");
  expect_accepts(s, {"[1, 2]", "[\n  1,\n  2\n]", "[\n\t1]", " [1] ",
                     "[\n                    1]"});  // newline + 20 blanks: the most allowed
  expect_rejects(s, {"[\n                     1]",   // 21 blanks
                     "[  1]", "[\n\n1]", "[1 ,  2]", "  [1]", "[1]  "});
}

TEST(JsonSchemaGrammar, PropertyOrderFollowsTheSchemaObject) {
  const char* text = R"({"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "integer"}}, "required": ["a", "b"]})";
  Schema ordered(Json::parse(text));
  expect_accepts(ordered, {R"({"b":1,"a":2})"});
  expect_rejects(ordered, {R"({"a":2,"b":1})"});
  // nlohmann::json sorts members by name, so that overload sees "a" first.
  const std::string sorted = json_schema_to_gbnf(nlohmann::json::parse(text)).gbnf;
  Grammar g;
  std::string err;
  ASSERT_TRUE(Grammar::parse(sorted, &g, &err)) << err;
  TokenTrie trie(byte_vocab());
  Automaton a(g, trie);
  Matcher m(a);
  EXPECT_TRUE(m.accept_bytes(R"({"a":2,"b":1})") && m.is_complete());
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamedWithTheirPath) {
  struct Case {
    const char* schema;
    const char* expect;
  };
  const Case cases[] = {
      {R"j({"type": "string", "pattern": "a(?!b)"})j",
       "keyword 'pattern' at (root) is not supported here: lookahead assertions"},
      {R"({"type": "string", "format": "iri"})",
       "keyword 'format' at (root) is not supported for 'iri' (supported: date, time, "
       "date-time, duration, uuid, email, hostname, ipv4, ipv6, uri)"},
      {R"({"format": "date", "maxLength": 9})",
       "keyword 'format' at (root) ('date'): no string matches it with a length from 0 to 9"},
      {R"({"type": "integer", "exclusiveMinimum": true, "minimum": 1})",
       "keyword 'exclusiveMinimum' at (root) is not supported in draft 4's boolean form"},
      {R"({"type": "integer", "maximum": 1e19})",
       "keyword 'maximum' at (root) is not supported "
       "beyond"},
      {R"({"multipleOf": 0.12345})", "keyword 'multipleOf'"},
      {R"({"properties": {"a": {"type": "number", "maximum": 1e20}}})",
       "keyword 'maximum' at /properties/a is not supported beyond +-1e15"},
      {R"({"properties": {"a": {"patternProperties": {}}}})",
       "response_format.json_schema.schema: keyword 'patternProperties' at /properties/a is not "
       "supported"},
      {R"({"properties": {"a": {}}, "propertyNames": {}})",
       "keyword 'propertyNames' at (root) is not supported beside 'properties'"},
      {R"({"properties": {"a": {}}, "minProperties": 1})", "keyword 'minProperties'"},
      {R"({"propertyNames": {"type": "integer"}})",
       "keyword 'type' at /propertyNames is not supported in propertyNames other than"},
      {R"({"propertyNames": {"items": {}}})", "keyword 'items' at /propertyNames"},
      {R"({"dependentRequired": {}})", "keyword 'dependentRequired'"},
      {R"({"not": {}})", "keyword 'not'"},
      {R"({"if": {}, "then": {}})", "keyword 'if'"},
      {R"({"items": {"contains": {}}})", "keyword 'contains' at /items"},
      {R"({"uniqueItems": true})", "keyword 'uniqueItems' at (root) is not supported"},
      {R"({"nullable": true})", "keyword 'nullable'"},
      {R"({"$defs": {"A": {"type": "string", "format": "iri"}}, "$ref": "#/$defs/A"})",
       "keyword 'format' at /$defs/A"},
      {R"({"allOf": [{}, {}]})", "keyword 'allOf' at (root) is not supported with more than one"},
      {R"({"type": "string", "anyOf": [{}]})",
       "keyword 'type' at (root) is not supported beside "
       "'anyOf'"},
      {R"({"$ref": "http://example.com/s.json"})", "keyword '$ref' at (root) is not supported"},
      {R"({"prefixItems": [{"a/b~": {}}]})", "keyword 'a/b~' at /prefixItems/0"},
      {R"({"properties": {"a/b": {"x": 1}}})", "keyword 'x' at /properties/a~1b"},
      {R"({"maxLength": 5000})", "keyword 'maxLength' at (root) is not supported above 1000"},
      {R"({"minItems": 1001})", "keyword 'minItems' at (root) is not supported above 1000"},
  };
  for (const Case& c : cases) {
    std::string err = error_of(c.schema);
    EXPECT_NE(err.find(c.expect), std::string::npos)
        << "schema: " << c.schema << "\nerror: " << err;
  }
}

TEST(JsonSchemaGrammar, MalformedAndUnsatisfiableSchemas) {
  struct Case {
    const char* schema;
    const char* expect;
  };
  const Case cases[] = {
      {"[]", "the schema at (root) must be an object or a boolean"},
      {"false", "the schema at (root) is false"},
      {R"({"type": "strin"})", "keyword 'type' at (root) has unknown type 'strin'"},
      {R"({"type": 3})", "keyword 'type' at (root) must be a type name"},
      {R"({"$ref": "#/$defs/Missing"})", "'#/$defs/Missing' does not resolve"},
      {R"({"properties": {"a": {}}, "required": ["b"]})", "names 'b', which 'properties'"},
      {R"({"minItems": -1})", "keyword 'minItems' at (root) must be a non-negative integer"},
      {R"({"minLength": 1.5})", "keyword 'minLength' at (root) must be a non-negative integer"},
      {R"({"minItems": 3, "maxItems": 2})", "at least 3 and at most 2 items"},
      {R"({"minLength": 3, "maxLength": 2})", "maxLength' at (root) is below minLength"},
      {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})",
       "no integer at (root) lies between the bounds 5 and 4"},
      {R"({"type": "integer", "minimum": 0.5, "maximum": 0.7})", "bounds 1 and 0"},
      {R"({"format": 3})", "keyword 'format' at (root) must be a string"},
      {R"({"type": "integer", "minimum": "0"})", "keyword 'minimum' at (root) must be a number"},
      {R"({"enum": []})", "keyword 'enum' at (root) must be a non-empty array"},
      {R"({"type": "integer", "enum": ["a"]})", "has no value of the schema's 'type'"},
      {R"({"anyOf": [false]})", "no branch of 'anyOf'"},
      {R"({"properties": {"a": false}, "required": ["a"]})", "property 'a' at (root) is required"},
      {R"({"$defs": {"A": {"properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}},
          "$ref": "#/$defs/A"})",
       "no finite JSON value satisfies the schema"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "a $ref leads back to its own schema"},
  };
  for (const Case& c : cases) {
    std::string err = error_of(c.schema);
    EXPECT_NE(err.find(c.expect), std::string::npos)
        << "schema: " << c.schema << "\nerror: " << err;
  }
}

// Length bounds expand into grammar rules: a schema whose bounds add up past what a grammar may
// expand to is refused with the reason (and quickly: grammar_test's
// RepetitionsAreBoundedAndCheapToAnalyse), one under it still converts.
TEST(JsonSchemaGrammar, BoundsThatExpandTooFarAreRefused) {
  auto strings = [](int n) {
    Json schema = {{"type", "object"}, {"properties", Json::object()}};
    for (int i = 0; i < n; ++i)
      schema["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 1000}};
    return schema.dump();
  };
  EXPECT_NO_THROW(json_schema_to_gbnf(Json::parse(strings(60))));
  const std::string err = error_of(strings(150));
  EXPECT_NE(err.find("make a grammar too large to enforce"), std::string::npos) << err;
}

// ---- pydantic 2 model_json_schema() output, written out by hand -------------------------------

// class Address(BaseModel): street: str; zip: Optional[str] = None
// class Color(str, Enum): red = "red"; green = "green"
// class Person(BaseModel):
//     name: str; age: int; email: Optional[str] = None; tags: List[str] = []
//     address: Address; previous: List[Address] = []; color: Color = Color.red
//     kind: Literal["person"] = "person"; mood: Literal["happy", "sad"]; score: Optional[float] =
//     None
const char* kPydanticPerson = R"({"$defs": {"Address": {"properties": {"street": {"title": "Street",
"type": "string"}, "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null,
"title": "Zip"}}, "required": ["street"], "title": "Address", "type": "object"}, "Color": {"enum":
["red", "green"], "title": "Color", "type": "string"}}, "properties": {"name": {"title": "Name",
"type": "string"}, "age": {"title": "Age", "type": "integer"}, "email": {"anyOf": [{"type":
"string"}, {"type": "null"}], "default": null, "title": "Email"}, "tags": {"default": [], "items":
{"type": "string"}, "title": "Tags", "type": "array"}, "address": {"$ref": "#/$defs/Address"},
"previous": {"default": [], "items": {"$ref": "#/$defs/Address"}, "title": "Previous", "type":
"array"}, "color": {"$ref": "#/$defs/Color", "default": "red"}, "kind": {"const": "person",
"default": "person", "title": "Kind", "type": "string"}, "mood": {"enum": ["happy", "sad"],
"title": "Mood", "type": "string"}, "score": {"anyOf": [{"type": "number"}, {"type": "null"}],
"default": null, "title": "Score"}}, "required": ["name", "age", "address", "mood"], "title":
"Person", "type": "object"})";

// class Category(BaseModel):
//     name: str; parent: Optional["Category"] = None; children: List["Category"] = []
//     meta: Dict[str, int] = {}; pair: Tuple[int, str]
const char* kPydanticCategory = R"({"$defs": {"Category": {"properties": {"name": {"title": "Name",
"type": "string"}, "parent": {"anyOf": [{"$ref": "#/$defs/Category"}, {"type": "null"}],
"default": null}, "children": {"default": [], "items": {"$ref": "#/$defs/Category"}, "title":
"Children", "type": "array"}, "meta": {"additionalProperties": {"type": "integer"}, "default": {},
"title": "Meta", "type": "object"}, "pair": {"maxItems": 2, "minItems": 2, "prefixItems":
[{"type": "integer"}, {"type": "string"}], "title": "Pair", "type": "array"}}, "required":
["name", "pair"], "title": "Category", "type": "object"}}, "$ref": "#/$defs/Category"})";

TEST(JsonSchemaGrammar, PydanticModels) {
  Schema person(kPydanticPerson);
  expect_accepts(person, {R"({"name":"Ann","age":30,"address":{"street":"Main"},"mood":"happy"})",
                          R"({"name": "Ann", "age": 30, "email": null, "tags": ["a", "b"],
  "address": {"street": "Main", "zip": "123"}, "previous": [{"street": "Old", "zip": null}],
  "color": "green", "kind": "person", "mood": "sad", "score": 1.5})"});
  expect_rejects(
      person, {R"({"name":"Ann","age":30,"address":{"street":"Main"}})",
               R"({"name":"Ann","age":30,"address":{"street":"Main"},"mood":"angry"})",
               R"({"name":"Ann","age":30,"address":{},"mood":"sad"})",
               R"({"name":"Ann","age":30,"address":{"street":"M"},"kind":"dog","mood":"sad"})",
               R"({"name":"Ann","age":30.5,"address":{"street":"M"},"mood":"sad"})",
               R"({"name":"Ann","age":3,"address":{"street":"M"},"color":"blue","mood":"sad"})"});
  Schema category(kPydanticCategory);
  expect_accepts(category,
                 {R"({"name":"a","pair":[1,"x"]})",
                  R"({"name":"a","parent":{"name":"p","pair":[0,""]},"children":[{"name":"c",
  "children":[{"name":"d","pair":[2,"y"]}],"pair":[1,"z"]}], "meta":{"k":1,"l":2},
  "pair":[1,"x"]})"});
  expect_rejects(category, {R"({"name":"a","pair":[1]})", R"({"name":"a","pair":[1,"x",2]})",
                            R"({"name":"a","meta":{"k":"v"},"pair":[1,"x"]})",
                            R"({"name":"a","parent":{},"pair":[1,"x"]})"});
}

// ---- random instances and mutations against a validator ---------------------------------------

// A JSON Schema validator for the supported subset (absent additionalProperties as the converter
// reads it). Object equality in enum/const keeps member order, like the grammar.
class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}
  bool valid(const Json& s, const Json& v) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref"))
      return valid(root_.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))), v);
    if (s.contains("allOf"))
      for (const Json& b : s["allOf"])
        if (!valid(b, v)) return false;
    if (s.contains("anyOf")) {
      bool any = false;
      for (const Json& b : s["anyOf"]) any |= valid(b, v);
      if (!any) return false;
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const Json& b : s["oneOf"]) n += valid(b, v);
      if (n != 1) return false;
    }
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return false;
    if (s.contains("type")) {
      Json types = s["type"].is_array() ? s["type"] : Json::array({s["type"]});
      bool any = false;
      for (const Json& t : types) any |= has_type(t.get<std::string>(), v);
      if (!any) return false;
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if ((s.contains("minimum") && d < s["minimum"].get<double>()) ||
          (s.contains("maximum") && d > s["maximum"].get<double>()) ||
          (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) ||
          (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()))
        return false;
    }
    if (v.is_string() && s.contains("format") && !format_ok(s["format"], v.get<std::string>()))
      return false;
    if (v.is_string()) {
      size_t chars = 0;
      for (unsigned char c : v.get<std::string>()) chars += (c & 0xC0) != 0x80;
      if (chars < s.value("minLength", size_t{0}) || chars > s.value("maxLength", SIZE_MAX))
        return false;
    }
    if (v.is_array()) {
      if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", SIZE_MAX))
        return false;
      const Json prefix = s.value("prefixItems", Json::array());
      for (size_t i = 0; i < v.size(); ++i) {
        const Json item = i < prefix.size() ? prefix[i] : s.value("items", Json(true));
        if (!valid(item, v[i])) return false;
      }
    }
    if (v.is_object()) {
      const Json props = s.value("properties", Json::object());
      for (const Json& r : s.value("required", Json::array()))
        if (!v.contains(r.get<std::string>())) return false;
      const Json extra = s.contains("additionalProperties") ? s["additionalProperties"]
                                                            : Json(!s.contains("properties"));
      for (const auto& [key, value] : v.items())
        if (!valid(props.contains(key) ? props[key] : extra, value)) return false;
    }
    return true;
  }

 private:
  static bool format_ok(const std::string& format, const std::string& v) {
    static const std::string kDate = R"((\d{4})-(\d{2})-(\d{2}))";
    static const std::string kTime =
        R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d))";
    std::smatch m;
    if (format == "uuid")
      return std::regex_match(v, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
    if (format == "time") return std::regex_match(v, std::regex(kTime));
    const std::string pattern = format == "date" ? kDate : kDate + "[tT]" + kTime;
    if (!std::regex_match(v, m, std::regex(pattern))) return false;
    const int month = std::stoi(m[2]), day = std::stoi(m[3]);
    static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month >= 1 && month <= 12 && day >= 1 && day <= kDays[month - 1];
  }
  static bool has_type(const std::string& t, const Json& v) {
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "array") return v.is_array();
    return v.is_object();
  }
  const Json& root_;
};

// Random valid instances; past `depth` 3 it takes the shortest choices so recursion ends.
class Generator {
 public:
  Generator(const Json& root, uint32_t seed) : root_(root), rng_(seed) {}
  Json instance(const Json& s, int depth = 0) {
    if (s.is_boolean()) return pick({Json(1), Json("t"), Json::array()});
    if (s.contains("$ref"))
      return instance(root_.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))), depth);
    if (s.contains("allOf")) return instance(s["allOf"][0], depth);
    for (const char* u : {"anyOf", "oneOf"})
      if (s.contains(u))
        return instance(s[u][deep(depth) ? s[u].size() - 1 : rng_() % s[u].size()], depth);
    if (s.contains("const")) return s["const"];
    if (s.contains("enum")) return s["enum"][rng_() % s["enum"].size()];
    const Json type = s.contains("type") ? s["type"] : Json("string");  // `format` alone
    const Json types = type.is_array() ? type : Json::array({type});
    const std::string t = types[rng_() % types.size()].get<std::string>();
    if (t == "integer") {
      int64_t lo = -1000, hi = 1000;
      if (s.contains("minimum")) lo = s["minimum"].get<int64_t>();
      if (s.contains("exclusiveMinimum")) lo = s["exclusiveMinimum"].get<int64_t>() + 1;
      if (s.contains("maximum")) hi = s["maximum"].get<int64_t>();
      if (s.contains("exclusiveMaximum")) hi = s["exclusiveMaximum"].get<int64_t>() - 1;
      return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
    }
    if (t == "number") return (static_cast<int>(rng_() % 2000) - 1000) / 8.0 + 0.125;
    if (t == "boolean") return rng_() % 2 == 0;
    if (t == "null") return nullptr;
    if (t == "string" && s.contains("format")) return format(s["format"].get<std::string>());
    if (t == "string") {
      static const char* const kPieces[] = {
          "a",  "Z",  " ",    "\"",       "\\",           "/",
          "\n", "\t", "\x01", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
      const size_t lo = s.value("minLength", size_t{0}), hi = s.value("maxLength", size_t{8});
      std::string out;
      for (size_t n = lo + rng_() % (std::min<size_t>(hi, lo + 8) - lo + 1); n-- > 0;)
        out += kPieces[rng_() % std::size(kPieces)];
      return out;
    }
    if (t == "array") {
      const Json prefix = s.value("prefixItems", Json::array());
      const size_t lo = s.value("minItems", size_t{0});
      const size_t hi = std::min(s.value("maxItems", size_t{4}), deep(depth) ? lo : lo + 4);
      Json out = Json::array();
      for (size_t n = lo + rng_() % (hi - lo + 1), i = 0; i < n; ++i)
        out.push_back(
            instance(i < prefix.size() ? prefix[i] : s.value("items", Json(true)), depth + 1));
      return out;
    }
    Json out = Json::object();
    const Json required = s.value("required", Json::array());
    const Json props = s.value("properties", Json::object());
    for (const auto& [key, prop] : props.items()) {
      const bool req = std::find(required.begin(), required.end(), Json(key)) != required.end();
      if (req || (!deep(depth) && rng_() % 2 == 0)) out[key] = instance(prop, depth + 1);
    }
    if (s.contains("additionalProperties") && s["additionalProperties"] != Json(false) &&
        !deep(depth) && rng_() % 2 == 0)
      out["extra_" + std::to_string(rng_() % 100)] = instance(s["additionalProperties"], depth + 1);
    return out;
  }

  // Text of v with random JSON whitespace (as the grammar bounds it) between tokens.
  std::string text(const Json& v) {
    std::string out = ws();
    write(v, out);
    return out + ws();
  }

  Json pick(std::vector<Json> options) { return options[rng_() % options.size()]; }
  uint32_t next() { return rng_(); }

 private:
  static bool deep(int depth) { return depth >= 3; }
  std::string format(const std::string& f) {
    auto num = [&](int lo, int hi) {
      return fmt::format("{:02}", lo + int(rng_() % (hi - lo + 1)));
    };
    const std::string date = fmt::format("{:04}-{}-{}", rng_() % 10000, num(1, 12), num(1, 28));
    const std::string time = fmt::format("{}:{}:{}{}", num(0, 23), num(0, 59), num(0, 59),
                                         rng_() % 2 ? "Z" : "+" + num(0, 23) + ":" + num(0, 59));
    if (f == "date") return date;
    if (f == "time") return time;
    if (f == "date-time") return date + "T" + time;
    std::string uuid;
    for (int i = 0; i < 32; ++i) {
      uuid += "0123456789abcdefABCDEF"[rng_() % 22];
      if (i == 7 || i == 11 || i == 15 || i == 19) uuid += '-';
    }
    return uuid;
  }
  std::string ws() {
    switch (rng_() % 4) {
      case 0:
        return " ";
      case 1:
        return "\n" + std::string(rng_() % 21, rng_() % 2 ? ' ' : '\t');
      default:
        return "";
    }
  }
  void write(const Json& v, std::string& out) {
    if (v.is_object() || v.is_array()) {
      out += v.is_object() ? "{" : "[";
      out += ws();
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += "," + ws();
        first = false;
        if (v.is_object()) out += Json(it.key()).dump() + ws() + ":" + ws();
        write(it.value(), out);
        out += ws();
      }
      out += v.is_object() ? "}" : "]";
      return;
    }
    out += v.dump();
  }
  const Json& root_;
  std::mt19937 rng_;
};

// Every node of v, as JSON pointers.
void nodes(const Json& v, const std::string& at, std::vector<std::string>& out) {
  out.push_back(at);
  if (v.is_object())
    for (const auto& [key, value] : v.items()) nodes(value, at + "/" + key, out);
  if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) nodes(v[i], at + "/" + std::to_string(i), out);
}

// Changes one random node: another type, a member removed or added, an item added or removed.
Json mutate(const Json& v, Generator& gen) {
  Json out = v;
  std::vector<std::string> all;
  nodes(out, "", all);
  Json& node = out[Json::json_pointer(all[gen.next() % all.size()])];
  switch (gen.next() % 3) {
    case 0:
      node = gen.pick({Json(7), Json(-2.5), Json("str"), Json(true), Json(nullptr), Json(100000),
                       Json::array(), Json::object(), Json::array({1})});
      break;
    case 1:
      if (node.is_object() && !node.empty() && gen.next() % 2 == 0)
        node.erase(std::next(node.begin(), static_cast<long>(gen.next() % node.size())));
      else if (node.is_object())
        node["zz_unknown"] = 1;
      else
        node = Json::array({node});
      break;
    default:
      if (node.is_array() && !node.empty() && gen.next() % 2 == 0)
        node.push_back(Json(node[0]));
      else if (node.is_array() && !node.empty())
        node.erase(node.begin());
      else if (node.is_string())
        node = node.get<std::string>() + "xyz";
      else
        node = Json::object({{"k", node}});
      break;
  }
  return out;
}

const char* kMixed = R"({"type": "object", "properties": {
    "id": {"type": "integer"}, "label": {"type": "string", "minLength": 1, "maxLength": 5},
    "flags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    "kind": {"enum": ["a", "b", {"c": [1, 2]}]}, "ratio": {"type": ["number", "null"]},
    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
             "minItems": 2, "maxItems": 2},
    "extra": {"type": "object", "additionalProperties": {"type": "string"}},
    "count": {"type": "integer", "minimum": -3, "exclusiveMaximum": 250},
    "when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
    "uid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
    "required": ["id", "kind"], "additionalProperties": false})";

TEST(JsonSchemaGrammar, RandomInstancesAndMutationsAgreeWithTheValidator) {
  int checked_invalid = 0, checked_valid = 0;
  for (const char* text : {kPydanticPerson, kPydanticCategory, kMixed}) {
    const Json schema = Json::parse(text);
    Schema s(schema);
    Validator validator(schema);
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      Generator gen(schema, seed);
      const Json inst = gen.instance(schema);
      ASSERT_TRUE(validator.valid(schema, inst)) << inst.dump();
      const std::string doc = gen.text(inst);
      EXPECT_TRUE(s.matches(doc)) << doc;
      EXPECT_TRUE(s.matches(inst.dump())) << inst.dump();
      for (int k = 0; k < 10; ++k) {
        const Json bad = mutate(inst, gen);
        const bool valid = validator.valid(schema, bad);
        EXPECT_EQ(s.matches(bad.dump()), valid) << "from " << inst.dump() << "\nto " << bad.dump();
        checked_invalid += !valid;
        checked_valid += valid;
      }
    }
  }
  // Both directions are exercised: most mutations break the instance, some keep it valid.
  EXPECT_GT(checked_invalid, 500);
  EXPECT_GT(checked_valid, 50);
}

// The fast vocabulary mask equals the naive per-token one on a schema grammar.
TEST(JsonSchemaGrammar, MaskEqualsNaiveOnSyntheticVocabulary) {
  std::vector<std::string> vocab = byte_vocab();
  const std::string alphabet = "{}[]\",:0123456789-.eE+tfnrual \nidkbcxyz\\";
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    for (size_t len = 1 + rng() % 6; t.size() < len;) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  for (const char* piece : {"\"id\"", "\"kind\"", "\"label\":", "{\"", "\":", "\",\"", "null"})
    vocab.push_back(piece);
  TokenTrie trie(vocab);
  Grammar g;
  std::string err;
  ASSERT_TRUE(Grammar::parse(json_schema_to_gbnf(Json::parse(kMixed)).gbnf, &g, &err)) << err;
  Automaton a(g, trie);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::mt19937 walk(seed);
    Matcher m(a);
    std::vector<uint64_t> fast, naive(a.mask_words());
    for (int step = 0; step < 80; ++step) {
      m.fill_mask(fast);
      a.fill_mask_naive(m.state(), naive.data());
      ASSERT_EQ(fast, naive) << "seed " << seed << " step " << step;
      std::vector<uint32_t> allowed;
      for (uint32_t t = 0; t < trie.vocab_size(); ++t)
        if (Matcher::allowed(fast, t)) allowed.push_back(t);
      if (allowed.empty() || (m.is_complete() && walk() % 4 == 0)) {
        m.reset();
        continue;
      }
      ASSERT_TRUE(m.accept_token(allowed[walk() % allowed.size()]));
    }
  }
}

}  // namespace
