// The grammar SDK headers (sdk/include/pith/grammar*.hpp, token_trie.hpp) compiled natively:
// GBNF parse errors, acceptance/rejection of whole strings, completions, and the fast vocabulary
// mask against the naive per-token matcher on synthetic and the real Llama 3 vocabulary.
#include <gtest/gtest.h>
#include <pith/grammar_matcher.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using pith::TokenTrie;
using pith::grammar::Automaton;
using pith::grammar::Grammar;
using pith::grammar::Matcher;

const char* kArith = R"gbnf(
# integer arithmetic with optional single spaces
root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= number | "(" ws expr ws ")"
number ::= [0-9]+
ws     ::= " "?
)gbnf";

Grammar compile(std::string_view text) {
  Grammar g;
  std::string err;
  EXPECT_TRUE(Grammar::parse(text, &g, &err)) << err;
  return g;
}

std::string error_of(std::string_view text) {
  Grammar g;
  std::string err;
  EXPECT_FALSE(Grammar::parse(text, &g, &err)) << text;
  return err;
}

std::vector<std::string> byte_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  return v;
}

// A grammar over the 256 single-byte tokens: the matcher then sees plain strings.
struct Bytes {
  explicit Bytes(std::string_view text) : g(compile(text)), trie(byte_vocab()), a(g, trie) {}
  bool matches(std::string_view s) {
    Matcher m(a);
    return m.accept_bytes(s) && m.is_complete();
  }
  bool prefix(std::string_view s) {
    Matcher m(a);
    return m.accept_bytes(s);
  }
  Grammar g;
  TokenTrie trie;
  Automaton a;
};

TEST(GrammarParse, ErrorsNameWhatAndWhere) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"", "no rules"},
      {"   # only a comment\n", "no rules"},
      {"root ::= foo", "line 1, column 10: undefined rule 'foo'"},
      {"root ::= \"abc", "unterminated string literal"},
      {"root ::= \"ab\ncd\"", "unterminated string literal"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= \"\\q\"", "unknown escape '\\q'"},
      {"root ::= \"\\x4\"", "hex digits"},
      {"root ::= a\na ::= a \"x\" | \"y\"", "left recursion: a -> a"},
      {"root ::= b\nb ::= c \"x\"\nc ::= \"\" | b", "left recursion"},
      {"root ::= (\"a\"?)*", "left recursion"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= \"a\" )", "line 1, column 14: unexpected ')'"},
      {"root ::= \"a\" @", "unexpected character '@'"},
      {"root ::= a\na ::= \"x\" a", "derives no finite string"},
      {"root = \"a\"", "expected '::=' after rule name 'root'"},
      {"::= \"a\"", "expected a rule name"},
      {"root ::= \"a\"{3,2}", "n < m"},
      {"root ::= \"a\"{2", "expected '}'"},
      {"root ::= \"a\"{5000}", "repetition bound above"},
      {"root ::= ( \"a\" ", "expected ')'"},
      {"start ::= \"a\"", "no rule 'root'"},
      {"root ::= [z-a]", "reversed"},
      {"root ::= []", "empty character class"},
      {"root ::= [^\\x00-\\U0010FFFF]", "matches nothing"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
  };
  for (const Case& c : cases) {
    std::string err = error_of(c.text);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "grammar: " << c.text << "\nerror: " << err;
  }
}

TEST(GrammarParse, CustomRootAndHelperRules) {
  Grammar g;
  std::string err;
  ASSERT_TRUE(Grammar::parse("start ::= item+\nitem ::= [a-c] \",\"?", &g, &err, "start")) << err;
  EXPECT_EQ(g.rule_name(g.root()), "start");
  EXPECT_GT(g.rule_count(), 2u);  // the repetition and the optional became helper rules
}

TEST(GrammarMatch, Json) {
  Bytes j(pith::grammar::json_gbnf());
  for (const char* ok : {"{}", " [ ]\n", "0", "-0.0E-1", "true", "null", "\"\"",
                         "{\"a\": [1, -2.5e+3, true, false, null, \"x\\n\\u00e9\"]}",
                         "[[[[]]], {\"k\": {\"l\": {}}}]",
                         "\"\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E\"", "{\"a\":1,\"b\":\"\\\\\\/\"}"})
    EXPECT_TRUE(j.matches(ok)) << ok;
  for (const char* bad :
       {"{", "[1,]", "01", "{\"a\" 1}", "\"\x01\"", "tru", "\"\\x\"", "[1 2]", "\"\xC3\x28\"",
        "\"\xED\xA0\x80\"", "{'a': 1}", "1.", "-", "[1]]", "\"\xF5\x80\x80\x80\""})
    EXPECT_FALSE(j.matches(bad)) << bad;
  // Viable prefixes are accepted incrementally, dead ones are not.
  EXPECT_TRUE(j.prefix("{\"a\": [1, 2"));
  EXPECT_TRUE(j.prefix("\"\xE2\x82"));  // half a character
  EXPECT_FALSE(j.prefix("{\"a\": ]"));
  EXPECT_FALSE(j.prefix("[01"));
}

TEST(GrammarMatch, ArithmeticRepetitionClassesAndAnyChar) {
  Bytes a(kArith);
  for (const char* ok : {"1", "1+2", "(1 + 2) * 3", "((42))", "7/8-9"})
    EXPECT_TRUE(a.matches(ok)) << ok;
  for (const char* bad : {"", "+1", "1+", "(1", "1  + 2", "a", "1)"})
    EXPECT_FALSE(a.matches(bad)) << bad;

  Bytes r("root ::= \"a\"{2,3} \"b\"");
  EXPECT_TRUE(r.matches("aab"));
  EXPECT_TRUE(r.matches("aaab"));
  EXPECT_FALSE(r.matches("ab"));
  EXPECT_FALSE(r.matches("aaaab"));

  Bytes c("root ::= [^a\\n]+ \"\\n\"");
  EXPECT_TRUE(c.matches("b\xC3\xA9z\n"));
  EXPECT_FALSE(c.matches("bad\n"));
  EXPECT_FALSE(c.matches("\x80\n"));  // a lone continuation byte is not a character

  Bytes any("root ::= . . \"!\"  # two characters of any length");
  EXPECT_TRUE(any.matches("x\xF0\x9F\x98\x80!"));
  EXPECT_FALSE(any.matches("x!"));

  Bytes multi("root ::= ( \"ab\" | \"c\" )*\n  \"d\"");  // newlines inside a rule are whitespace
  EXPECT_TRUE(multi.matches("abcabd"));
  EXPECT_FALSE(multi.matches("abad"));
}

TEST(GrammarMatch, CompletionFinishesAnyViablePrefix) {
  Bytes j(pith::grammar::json_gbnf());
  const std::string doc = "{\"key\": [1.5e3, {\"x\": \"\xC3\xA9\\u00e9\"}, true], \"n\": null}";
  for (size_t cut = 0; cut <= doc.size(); ++cut) {
    Matcher m(j.a);
    ASSERT_TRUE(m.accept_bytes(doc.substr(0, cut))) << cut;
    std::string rest = m.completion();
    ASSERT_TRUE(m.accept_bytes(rest)) << doc.substr(0, cut) << " + " << rest;
    EXPECT_TRUE(m.is_complete()) << doc.substr(0, cut) << " + " << rest;
  }
}

// Grammars a request can send cost a bounded moment to compile (found by fuzz_openai_request: a
// JSON schema's maxLength expands into a chain of optional rules, and the analysis fixpoints
// took a pass per link, quadratic; 200 such strings took 4 s in a release build):
//  - bounded repetitions expand to at most Grammar's kMaxExpanded elements in all;
//  - chains of rules settle in a few passes (100 chains of 1 000 links: well under a second,
//    sanitizers included; before, ~2 s in a release build and ~20 s with them);
//  - nested repetitions whose shortest sentence is astronomically long compile, and their
//    completion is spelled out only up to kMaxTail + 1 bytes.
TEST(GrammarParse, RepetitionsAreBoundedAndCheapToAnalyse) {
  auto chains = [](int n) {
    std::string g = "root ::=";
    for (int i = 0; i < n; ++i) g += " s" + std::to_string(i);
    g += "\n";
    for (int i = 0; i < n; ++i) g += "s" + std::to_string(i) + " ::= \"'\" [a-z]{2,1000} \"'\"\n";
    return g;
  };
  Grammar g;
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(Grammar::parse(chains(100), &g, &err)) << err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_FALSE(Grammar::parse(chains(101), &g, &err));
  EXPECT_NE(err.find("repetitions expand to more than 100000 elements"), std::string::npos) << err;

  Bytes nested(R"(root ::= ((("a"{1000}){1000}){1000}))");
  Matcher m(nested.a);
  EXPECT_EQ(m.completion().size(), Grammar::kMaxTail + 1);
  ASSERT_TRUE(m.accept_bytes(std::string(999, 'a')));
  EXPECT_EQ(m.completion().size(), Grammar::kMaxTail + 1);
  Bytes short_one(R"(root ::= ("ab"{3}){2})");
  Matcher s(short_one.a);
  ASSERT_TRUE(s.accept_bytes("aba"));
  EXPECT_EQ(s.completion(), "babababab");
}

// Fuzzing findings: directly stacked repetitions (`"[" +++...`, each `+` repeating the one before)
// nested a repetition per operator, and the matcher's stack sets exploded (559 738 stacks after
// "[[[]" for 60 pluses; a step took 104 s in the fuzz build, 50 s in a release build, as the
// positions one step visits were also remembered in a list). Stacked ?, *, + now merge into one
// operator at parse time, and a step's visited positions are a hash set.
TEST(GrammarMatcher, StackedRepetitionsStepQuickly) {
  const std::string g = "root ::= \"[\" " + std::string(60, '+') + " \"]\"";
  const auto t0 = std::chrono::steady_clock::now();
  Bytes stacked(g);
  Matcher m(stacked.a);
  ASSERT_TRUE(m.accept_bytes("[[["));
  EXPECT_FALSE(m.is_complete());
  ASSERT_TRUE(m.accept_bytes("]"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_LT(stacked.a.stack_count(), 64u);
}

TEST(GrammarParse, StackedOperatorsMergeWithoutChangingTheLanguage) {
  Bytes plus_opt(R"(root ::= "x"+? "y")");  // (x+)? = x*
  EXPECT_TRUE(plus_opt.matches("y"));
  EXPECT_TRUE(plus_opt.matches("xxy"));
  Bytes opt_opt(R"(root ::= "x"?? "y")");  // (x?)? = x?
  EXPECT_TRUE(opt_opt.matches("y"));
  EXPECT_TRUE(opt_opt.matches("xy"));
  EXPECT_FALSE(opt_opt.matches("xxy"));
  Bytes opt_plus(R"(root ::= "x"?+ "y")");  // (x?)+ = x*
  EXPECT_TRUE(opt_plus.matches("y"));
  EXPECT_TRUE(opt_plus.matches("xxxy"));
  Bytes plus_plus(R"(root ::= "ab"++ "y")");  // (ab+)+ = (ab)+ on the literal as a whole
  EXPECT_FALSE(plus_plus.matches("y"));
  EXPECT_TRUE(plus_plus.matches("ababy"));
  Bytes counted(R"(root ::= "x"{2}+ "y")");  // counted ones do not merge: an even number of x
  EXPECT_TRUE(counted.matches("xxy"));
  EXPECT_TRUE(counted.matches("xxxxy"));
  EXPECT_FALSE(counted.matches("xxxy"));
  Bytes counted_after(R"(root ::= "x"+{2} "y")");  // (x+){2}: two or more
  EXPECT_FALSE(counted_after.matches("xy"));
  EXPECT_TRUE(counted_after.matches("xxxy"));
}

// Random walks under the grammar: at every step the fast mask equals the naive one.
void expect_masks_match(Automaton& a, uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  Matcher m(a);
  std::vector<uint64_t> fast, naive(a.mask_words());
  for (int step = 0; step < steps; ++step) {
    m.fill_mask(fast);
    a.fill_mask_naive(m.state(), naive.data());
    ASSERT_EQ(fast, naive) << "seed " << seed << " step " << step;
    std::vector<uint32_t> allowed;
    for (uint32_t t = 0; t < a.trie().vocab_size(); ++t)
      if (Matcher::allowed(fast, t)) allowed.push_back(t);
    if (allowed.empty() || (m.is_complete() && rng() % 4 == 0)) {
      m.reset();
      continue;
    }
    ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
  }
}

TEST(GrammarMask, EqualsNaiveOnSyntheticVocabulary) {
  std::vector<std::string> vocab = byte_vocab();
  const std::string alphabet = "{}[]\",:0123456789-.eE+tfnrual \n\\u\xC3\xA9";
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    for (size_t len = 1 + rng() % 6; t.size() < len;) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  vocab.push_back("<|eot_id|>");
  std::vector<bool> special(vocab.size(), false);
  special.back() = true;
  TokenTrie trie(vocab, special);
  for (const char* text : {pith::grammar::json_gbnf(), kArith}) {
    Grammar g = compile(text);
    for (uint32_t frames : {1u, 2u, 3u, 5u}) {
      Automaton a(g, trie, frames);
      for (uint32_t seed = 1; seed <= 3; ++seed) expect_masks_match(a, seed * 100 + frames, 60);
    }
  }
}

// Bounded repetitions compile to chains of links, one context per count left; a lower link's
// context copies the short tokens from its chain top's and walks only the deeper subtrees.
// Masks must stay the naive ones at every count (counts left below and above the tokens'
// lengths), for x of one byte, of several bytes (UTF-8, escapes), chains nested in chains and
// chains in the frames below the top.
TEST(GrammarMask, EqualsNaiveOnBoundedRepetitionsAtEveryCount) {
  std::vector<std::string> vocab = byte_vocab();
  const std::string pieces[] = {"a", "b", "0", "-", "\\", "\"",
                                ",", "[", "]", "<", ">",  "\xC3\xA9"};
  std::mt19937 rng(17);
  for (int i = 0; i < 4000; ++i) {  // mostly [ab0-], so the string chain's contexts are broad
    std::string t;
    for (size_t len = 1 + rng() % (i % 3 == 0 ? 24 : 5); t.size() < len;)
      t += pieces[rng() % 5 ? rng() % 4 : rng() % std::size(pieces)];
    vocab.push_back(t);
  }
  TokenTrie trie(vocab);
  const char* text = R"gbnf(
    root  ::= "\"" [a-z0-9-]{0,30} "\"" | "<" ( [0-9] | "\\" [ab] ){2,12} ">"
            | "[" ( [ab]{0,6} "," ){0,9} "]" | "\u00E9"{1,7} "-" chars{0,20} "\""
    chars ::= [^"\\] | "\\" ["\\]
  )gbnf";
  Grammar g = compile(text);
  for (uint32_t frames : {1u, 2u, 3u, 5u}) {
    Automaton a(g, trie, frames);
    for (uint32_t seed = 1; seed <= 6; ++seed) expect_masks_match(a, seed * 31 + frames, 120);
    EXPECT_GT(a.derived_context_count(), 10u) << "frames " << frames;
  }
}

// The flat form a host hands a guest (pith_vocab_trie) is the whole trie: a trie rebuilt from a
// copy of its words answers every query as the original, and words that are not a trie of this
// version are refused.
TEST(TokenTrie, FlatFormRoundTripsAndRefusesOtherWords) {
  std::vector<std::string> vocab = byte_vocab();
  std::mt19937 rng(3);
  for (int i = 0; i < 500; ++i) {
    std::string t;
    for (size_t len = 1 + rng() % 5; t.size() < len;) t += static_cast<char>('a' + rng() % 6);
    vocab.push_back(t);
  }
  vocab.push_back("ab");  // a duplicate of a generated token, most likely: chained by same_next
  vocab.push_back("");
  vocab.push_back("<|eot_id|>");
  std::vector<bool> special(vocab.size(), false);
  special.back() = true;
  const TokenTrie trie(vocab, special);
  auto copy_words = [&] {
    std::shared_ptr<uint32_t[]> w(new uint32_t[trie.flat_words()]);
    std::copy(trie.flat_data(), trie.flat_data() + trie.flat_words(), w.get());
    return w;
  };
  TokenTrie copy;
  ASSERT_TRUE(TokenTrie::from_flat(copy_words(), trie.flat_words(), &copy));
  ASSERT_EQ(copy.nodes(), trie.nodes());
  ASSERT_EQ(copy.vocab_size(), vocab.size());
  EXPECT_EQ(copy.max_depth(), trie.max_depth());
  for (uint32_t n = 0; n < trie.nodes(); ++n) {
    EXPECT_EQ(copy.byte(n), trie.byte(n));
    EXPECT_EQ(copy.depth(n), trie.depth(n));
    EXPECT_EQ(copy.end(n), trie.end(n));
    EXPECT_EQ(copy.token(n), trie.token(n));
  }
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    EXPECT_EQ(copy.bytes(id), vocab[id]);
    EXPECT_EQ(copy.same_next(id), trie.same_next(id));
    EXPECT_EQ(copy.usable(id), !vocab[id].empty() && !special[id]);
  }
  Grammar g = compile(kArith);
  Automaton a(g, copy);
  expect_masks_match(a, 11, 40);

  TokenTrie untouched;
  auto bad = copy_words();
  bad[0] ^= 1;  // magic
  EXPECT_FALSE(TokenTrie::from_flat(bad, trie.flat_words(), &untouched));
  bad = copy_words();
  bad[1] = 99;  // version
  EXPECT_FALSE(TokenTrie::from_flat(bad, trie.flat_words(), &untouched));
  EXPECT_FALSE(TokenTrie::from_flat(copy_words(), trie.flat_words() - 1, &untouched));
  EXPECT_FALSE(TokenTrie::from_flat(nullptr, 0, &untouched));
  bad = copy_words();
  bad[5] += 4;  // text bytes: the words then have the wrong size
  EXPECT_FALSE(TokenTrie::from_flat(bad, trie.flat_words(), &untouched));
  EXPECT_EQ(untouched.nodes(), 0u);
}

TEST(GrammarMask, EqualsNaiveOnLlama3Vocabulary) {
  pith::Tokenizer tok =
      pith::Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  ASSERT_GT(tok.vocab_size(), 128000u);
  std::vector<std::string> vocab;
  std::vector<bool> special;
  for (size_t i = 0; i < tok.vocab_size(); ++i) {
    vocab.push_back(tok.token_bytes(static_cast<int32_t>(i)));
    special.push_back(tok.is_special(static_cast<int32_t>(i)));
  }
  TokenTrie trie(vocab, special);
  Grammar g = compile(pith::grammar::json_gbnf());
  Automaton a(g, trie);
  Matcher m(a);
  std::vector<uint64_t> fast, naive(a.mask_words());
  auto count = [](const std::vector<uint64_t>& mask) {
    size_t n = 0;
    for (uint64_t w : mask) n += static_cast<size_t>(__builtin_popcountll(w));
    return n;
  };
  // Feed a document token by token (greedy longest tokens), comparing masks at each step.
  const std::string doc =
      "{\"name\": \"caf\xC3\xA9 \\\"x\\\"\", \"list\": [1, -2.5, true], \"o\": {}}";
  size_t at = 0, steps = 0;
  const uint32_t eot = static_cast<uint32_t>(tok.find_token("<|eot_id|>"));
  while (at < doc.size()) {
    m.fill_mask(fast);
    a.fill_mask_naive(m.state(), naive.data());
    ASSERT_EQ(fast, naive) << "after " << doc.substr(0, at);
    EXPECT_FALSE(Matcher::allowed(fast, eot));
    if (at == 10) {
      EXPECT_GT(count(fast), 100000u) << "inside a string almost every token fits";
    }
    if (at == 1) {
      EXPECT_LT(count(fast), 20000u) << "after '{' only keys, spaces or '}'";
    }
    int32_t t = trie.longest_prefix(doc.substr(at));
    ASSERT_GE(t, 0);
    ASSERT_TRUE(Matcher::allowed(fast, static_cast<uint32_t>(t))) << vocab[static_cast<size_t>(t)];
    ASSERT_TRUE(m.accept_token(static_cast<uint32_t>(t)));
    at += vocab[static_cast<size_t>(t)].size();
    ++steps;
  }
  EXPECT_TRUE(m.is_complete());
  m.fill_mask(fast, eot);
  EXPECT_TRUE(Matcher::allowed(fast, eot)) << "a complete document allows the end token";

  // A bounded string (maxLength 300 as the JSON Schema converter writes it): each count left
  // is a context of its own, classified from the chain top's; masks equal the naive ones.
  Grammar bounded =
      compile(R"gbnf(root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] ){0,300} "\"")gbnf");
  Automaton b(bounded, trie);
  Matcher bm(b);
  const std::string text = "\"The quick brown fox, \\\"jumps\\\" over 12 lazy dogs; caf\xC3\xA9.\"";
  for (size_t pos = 0; pos < text.size();) {
    bm.fill_mask(fast);
    b.fill_mask_naive(bm.state(), naive.data());
    ASSERT_EQ(fast, naive) << "after " << text.substr(0, pos);
    const int32_t t = trie.longest_prefix(text.substr(pos));
    ASSERT_GE(t, 0);
    ASSERT_TRUE(bm.accept_token(static_cast<uint32_t>(t)));
    pos += vocab[static_cast<size_t>(t)].size();
  }
  EXPECT_TRUE(bm.is_complete());
  EXPECT_GT(b.derived_context_count(), 5u);
  EXPECT_GT(steps, 10u);
}

}  // namespace
