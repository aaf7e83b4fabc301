// libFuzzer target: the GBNF compiler and matcher of the SDK (pith/grammar.hpp,
// pith/grammar_matcher.hpp), which run on grammars an inferlet or a request supplies. The input is
// a grammar, then a NUL byte, then text: the grammar compiles or is refused with a message; a
// compiled one is run over the text byte by byte, and at each step the fast token mask must equal
// the naive one (every token matched from scratch) and completion() must finish the prefix.
// Exponentially ambiguous grammars are cut short (see the loop).
#include <pith/grammar.hpp>
#include <pith/grammar_matcher.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Single bytes plus multi-byte tokens that straddle JSON-ish structure, like a real vocabulary.
const pith::TokenTrie& trie() {
  static const pith::TokenTrie t = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"{\"", "\":", "\",", "\"}", "[]", "true", "false", "null", "  ", "\n ",
                          "ab", "abc", "12", "0.", "e+", "\\u", "\\n", "\xC3\xA9", "<|eot|>"})
      v.emplace_back(s);
    std::vector<bool> special(v.size(), false);
    special.back() = true;
    return pith::TokenTrie(v, special);
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  std::string_view text = in.substr(0, nul);
  std::string_view sample = nul == std::string_view::npos ? "" : in.substr(nul + 1);
  pith::grammar::Grammar g;
  std::string error;
  if (!pith::grammar::Grammar::parse(text, &g, &error)) {
    if (error.empty()) __builtin_trap();  // a refusal always says why
    return 0;
  }
  pith::grammar::Automaton a(g, trie());
  pith::grammar::Matcher m(a);
  std::vector<uint64_t> fast, naive(a.mask_words());
  for (size_t i = 0; i <= sample.size() && i < 32; ++i) {
    // A highly ambiguous grammar (e.g. `x ::= [a-z]+ x*`) makes the stack sets grow without
    // bound: known and accepted — in pith the matcher runs inside the inferlet, whose CPU limit
    // ends it. Such inputs stop here instead of timing the fuzzer out.
    if (a.stack_count() > 4096 || a.state_count() > 4096) return 0;
    m.fill_mask(fast);
    if (a.stack_count() > 512) return 0;  // (the naive oracle is the slow part then)
    a.fill_mask_naive(m.state(), naive.data());
    if (fast != naive) __builtin_trap();
    pith::grammar::Matcher done = m;
    const std::string rest = m.completion();  // longer than kMaxTail: only its start is spelled
    if (rest.size() <= pith::grammar::Grammar::kMaxTail &&
        (!done.accept_bytes(rest) || !done.is_complete()))
      __builtin_trap();
    if (i == sample.size() || !m.accept_bytes(sample.substr(i, 1))) break;
  }
  return 0;
}
