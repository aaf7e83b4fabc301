#include "server/response_format.h"

#include <fmt/format.h>

#include "server/json_schema_grammar.h"
#include "server/openai_api.h"

namespace pith::server {

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw InvalidRequest("response_format", message);
}

template <typename Json>
std::string grammar_of(const Json& format) {
  if (!format.is_object()) bad("'response_format' must be an object");
  auto type = format.find("type");
  if (type == format.end() || !type->is_string())
    bad("'response_format' needs a 'type': text, json_object or json_schema");
  const std::string kind = type->template get<std::string>();
  for (const auto& [key, value] : format.items())
    if (key != "type" && !(kind == "json_schema" && key == "json_schema"))
      bad(fmt::format("unrecognized response_format field '{}' for type '{}'", key, kind));
  try {
    if (kind == "text") return "";
    if (kind == "json_object") return json_schema_to_gbnf(Json{{"type", "object"}}).gbnf;
    if (kind != "json_schema")
      bad(
          fmt::format("response_format type '{}' is not supported (text, json_object, "
                      "json_schema)",
                      kind));
    auto spec = format.find("json_schema");
    if (spec == format.end() || !spec->is_object())
      bad("response_format type 'json_schema' needs a 'json_schema' object");
    for (const auto& [key, value] : spec->items())
      if (key != "name" && key != "schema" && key != "strict" && key != "description")
        bad(fmt::format("unrecognized response_format.json_schema field '{}'", key));
    auto name = spec->find("name");
    if (name == spec->end() || !name->is_string() || name->template get<std::string>().empty())
      bad("response_format.json_schema needs a non-empty 'name'");
    if (auto strict = spec->find("strict");
        strict != spec->end() && !strict->is_null() && !strict->is_boolean())
      bad("response_format.json_schema.strict must be a boolean");
    auto schema = spec->find("schema");
    // OpenAI treats a missing schema as "any JSON value".
    if (schema == spec->end() || schema->is_null()) return json_schema_to_gbnf(Json(true)).gbnf;
    // Strict or not, the grammar enforces the schema: every keyword is either enforced or
    // refused, so "strict": false never silently means "not checked".
    return json_schema_to_gbnf(*schema).gbnf;
  } catch (const InvalidRequest&) {
    throw;
  } catch (const std::exception& e) {
    bad(e.what());
  }
}

}  // namespace

std::string response_format_grammar(const nlohmann::json& format,
                                    const nlohmann::ordered_json* ordered) {
  if (format.is_null()) return "";
  return ordered ? grammar_of(*ordered) : grammar_of(format);
}

}  // namespace pith::server
