// A GBNF grammar compiled over a vocabulary of the 256 bytes, to run a text through it byte by
// byte with the SDK's matcher (the forced-call and response_format grammars' tests).
#pragma once

#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pith::server {

struct ByteGrammar {
  explicit ByteGrammar(std::string text) : gbnf(std::move(text)) {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    trie = TokenTrie(bytes);
    std::string err;
    EXPECT_TRUE(grammar::Grammar::parse(gbnf, &g, &err)) << err << "\n" << gbnf;
    a = std::make_unique<grammar::Automaton>(g, trie);
  }
  // Whether `s` is a whole sentence of the grammar.
  bool matches(std::string_view s) const {
    grammar::Matcher m(*a);
    return m.accept_bytes(s) && m.is_complete();
  }
  std::string gbnf;
  grammar::Grammar g;
  TokenTrie trie;
  std::unique_ptr<grammar::Automaton> a;
};

}  // namespace pith::server
