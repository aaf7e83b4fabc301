// JSON Schema to GBNF: OpenAI structured outputs (`response_format` {"type": "json_schema"}) as a
// grammar for the SDK's matcher (sdk/include/pith/grammar.hpp, grammar_matcher.hpp), so the
// built-in inferlet can mask every token against the schema. The grammar's start rule is `root`.
//
// Supported (the subset vLLM / xgrammar enforce):
//   type (one name or a list), enum, const, $ref to local pointers ("#", "#/$defs/Name",
//   "#/definitions/Name", any "#/..."; recursion becomes recursive rules), anyOf, oneOf (as
//   alternatives: an instance matching two branches is not rejected), allOf with one schema,
//   $defs / definitions, boolean schemas;
//   objects: properties (emitted in the order the schema object holds them), required,
//   additionalProperties (false, true or a schema; extra members come after the declared ones
//   and their names are not checked against the declared names); for dictionaries (no
//   properties): propertyNames (a string schema), minProperties, maxProperties, and one
//   patternProperties entry (keys matching it, values of its schema);
//   arrays: items (a schema, or a list = prefixItems), prefixItems, additionalItems, minItems,
//   maxItems (at most 1000), uniqueItems: false;
//   strings: minLength, maxLength (at most 1000; an escape counts as one character), pattern
//   (ECMA-262 regular expressions, json_schema_pattern.h), format date, time, date-time,
//   duration, uuid, email, hostname, ipv4, ipv6, uri (json_schema_scalars.h); minLength and
//   maxLength beside a pattern or format as json_schema_pattern.h's limit_length says;
//   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, within +-1e18);
//   numbers: the same bounds (within +-1e15), compared exactly as decimals; bounded numbers are
//   written without exponent, with at most 15 significant digits (json_schema_scalars.h);
//   multipleOf of up to 3 significant digits, beside a bound at 0 only (json_schema_scalars.h).
// Accepted and ignored (annotations): title, description, default, examples, $schema, $id,
//   $comment, deprecated, readOnly, writeOnly, discriminator (the oneOf branches constrain).
// Everything else is rejected with a pith::Error naming the keyword and its JSON pointer, e.g.
//   "response_format.json_schema.schema: keyword 'not' at /properties/a is not supported"
// (other formats, longer multipleOf steps, the dictionary keywords beside properties,
// dependentRequired, not, if, contains, uniqueItems: true, remote $refs, ...).
//
// Choices where JSON Schema leaves room:
//  - An object that declares `properties` but no additionalProperties allows no other members
//    (OpenAI strict mode); an object schema with neither allows any members.
//  - Without `type`, the type follows from the keywords present (properties -> object, items ->
//    array, minLength -> string); a schema with none of them (or `true`) is any JSON value.
//  - enum / const values match their compact serialization (no escapes other than the ones
//    JSON requires, numbers as written), with whitespace allowed inside arrays and objects.
//  - Integers are written without fraction or exponent.
//  - Beside $ref, anyOf, oneOf, allOf, enum and const only annotations (and `type` beside enum /
//    const, where it filters the values) are accepted; other keywords there are rejected.
//  - Whitespace between tokens: none, one space, or a newline and up to 20 blanks.
// nlohmann::json keeps object members sorted by name, so a schema held in it has its
// properties emitted alphabetically; parse the schema as nlohmann::ordered_json to keep the
// declared order (what OpenAI does).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace pith::server {

struct SchemaGrammar {
  std::string gbnf;  // root rule is `root`
};

// The text the grammar writes: JSON, or the value syntax of Gemma 4's tool calls (strings
// quoted by <|"|>, object keys bare, the rest as JSON; tool_calls_gemma4.cpp reads it back).
// In the Gemma 4 syntax a string's `format` and `pattern` are not enforced and bounded strings hold
// no '<'.
enum class ValueSyntax { Json, Gemma4 };

// Throws pith::Error for an unsupported or malformed schema, and for one no finite JSON value
// satisfies (e.g. a required property that must contain itself).
SchemaGrammar json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                  ValueSyntax syntax = ValueSyntax::Json);
SchemaGrammar json_schema_to_gbnf(const nlohmann::json& schema,
                                  ValueSyntax syntax = ValueSyntax::Json);

}  // namespace pith::server
