// Shared by the JSON Schema converter's tests: a schema's grammar over the 256 single-byte
// tokens (the matcher sees plain bytes), random documents of it, and the error a schema gets.
#pragma once

#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "server/json_schema_grammar.h"

namespace pith::server::testing {

inline std::vector<std::string> byte_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  return v;
}

struct ByteGrammar {
  explicit ByteGrammar(const nlohmann::ordered_json& schema) : trie(byte_vocab()) {
    gbnf = json_schema_to_gbnf(schema).gbnf;
    std::string err;
    EXPECT_TRUE(grammar::Grammar::parse(gbnf, &g, &err)) << err << "\n" << gbnf;
    a = std::make_unique<grammar::Automaton>(g, trie);
  }
  // Whether the document (JSON text) is accepted and complete.
  bool accepts_text(std::string_view doc) const {
    grammar::Matcher m(*a);
    return m.accept_bytes(doc) && m.is_complete();
  }
  // A random complete document of ASCII bytes (whitespace left out if asked), or nullopt if the
  // walk got stuck or ran past max_steps unfinished.
  std::optional<std::string> walk(std::mt19937& rng, int max_steps, bool skip_whitespace) const {
    grammar::Matcher m(*a);
    std::string doc;
    std::vector<uint64_t> mask;
    for (int step = 0; step < max_steps; ++step) {
      if (m.is_complete() && !doc.empty() && rng() % 3 == 0) return doc;
      m.fill_mask(mask);
      std::vector<uint32_t> next;
      for (uint32_t b = 0; b < 128; ++b) {
        const bool ws = b == ' ' || b == '\n' || b == '\t';
        if (grammar::Matcher::allowed(mask, b) && !(skip_whitespace && ws)) next.push_back(b);
      }
      if (next.empty()) break;
      const uint32_t b = next[rng() % next.size()];
      EXPECT_TRUE(m.accept_token(b));
      doc += static_cast<char>(b);
    }
    return m.is_complete() ? std::optional<std::string>(doc) : std::nullopt;
  }
  std::string gbnf;
  grammar::Grammar g;
  TokenTrie trie;
  std::unique_ptr<grammar::Automaton> a;
};

// The pith::Error a schema is refused with ("" and a test failure if it converts).
inline std::string error_of(const nlohmann::ordered_json& schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << schema.dump();
  return "";
}

}  // namespace pith::server::testing
