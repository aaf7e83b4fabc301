// OpenAI structured outputs: a request's `response_format` as the GBNF grammar the built-in
// inferlet enforces on every token (inferlets/openai_completion --grammar).
//   {"type": "text"}                     -> no grammar
//   {"type": "json_object"}              -> any JSON object
//   {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}
//                                        -> the schema's grammar (json_schema_grammar.h)
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace pith::server {

// "" for plain text. Throws InvalidRequest (param "response_format") for a malformed format or a
// schema keyword the grammar cannot enforce. `ordered` is the same value parsed with its members
// in the order the client sent them (properties are generated in that order, as OpenAI does);
// null falls back to `format`, whose members are sorted by name.
std::string response_format_grammar(const nlohmann::json& format,
                                    const nlohmann::ordered_json* ordered);

}  // namespace pith::server
