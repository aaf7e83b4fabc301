// libFuzzer target: JSON Schema -> GBNF (server/json_schema_grammar.h), which turns a client's
// response_format or tool parameters into a grammar. Any JSON either converts or is refused with
// pith::Error; a converted schema must give a grammar the SDK compiles (a grammar the compiler
// refuses would fail the request later, inside the inferlet) whose shortest sentence it accepts.
#include <pith/grammar.hpp>
#include <pith/grammar_matcher.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto schema = nlohmann::ordered_json::parse(data, data + size, nullptr, false);
  if (schema.is_discarded()) return 0;
  std::string gbnf;
  try {
    gbnf = pith::server::json_schema_to_gbnf(schema).gbnf;
  } catch (const pith::Error&) {
    return 0;
  }
  pith::grammar::Grammar g;
  std::string error;
  if (!pith::grammar::Grammar::parse(gbnf, &g, &error)) {
    std::fprintf(stderr, "the converted grammar does not compile: %s\n%s\n", error.c_str(),
                 gbnf.c_str());
    __builtin_trap();
  }
  static const pith::TokenTrie trie = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
    return pith::TokenTrie(v);
  }();
  pith::grammar::Automaton a(g, trie);
  pith::grammar::Matcher m(a);
  std::string shortest = m.completion();
  if (shortest.size() > pith::grammar::Grammar::kMaxTail) return 0;  // only its start is spelled
  if (!m.accept_bytes(shortest) || !m.is_complete()) __builtin_trap();
  // The shortest sentence is JSON (a schema's grammar only ever produces JSON values).
  if (nlohmann::json::accept(shortest) == false) {
    std::fprintf(stderr, "shortest sentence is not JSON: %s\n", shortest.c_str());
    __builtin_trap();
  }
  return 0;
}
