// pith/grammar.hpp: GBNF grammars compiled to a byte-level form that a pushdown matcher can run
// over token bytes (pith/grammar_matcher.hpp), plus the built-in JSON grammar.
// Header-only and std-only (no ABI calls): inferlets use it on the guest, `pith bench grammar`
// and the unit tests compile the same header natively.
//
//   pith::grammar::Grammar g;
//   std::string err;
//   if (!pith::grammar::Grammar::parse(pith::grammar::json_gbnf(), &g, &err)) fail(err);
//
// Syntax (llama.cpp's GBNF): `name ::= alternatives`, alternatives separated by `|`, sequences
// of "literals" (escapes \n \r \t \\ \" \' \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH), [character
// classes] with ranges and ^ negation, `.` (any character), rule names, ( groups ), and the
// postfix operators * + ? {m} {m,} {m,n}. `#` starts a comment; newlines are plain whitespace
// (a rule ends where the next `name ::=` begins). Characters are Unicode code points matched as
// their UTF-8 bytes: a class becomes alternatives of byte ranges, so the matcher works on raw
// token bytes, including tokens that hold only part of a character.
//
// Compiled form: every rule is a list of alternatives; all alternatives lie back to back in one
// array of elements, each ending with an End element. An element is a byte set (one byte of
// input), a rule reference, or End. Repetitions become helper rules (x* -> R ::= x R | ε), so a
// position (an index into that array) is the whole parser state of one stack frame.
// Rejected at compile time: undefined or duplicate rules, left recursion (also through nullable
// prefixes, e.g. ("a"?)* ), rules that derive no finite string, and syntax errors; each error
// names the line and column.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pith::grammar {

// A set of byte values.
struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 256; ++b) add(static_cast<uint8_t>(b));
  }
  // Adds o's members; true if that changed the set.
  bool merge(const ByteSet& o) {
    bool changed = false;
    for (int i = 0; i < 4; ++i) {
      uint64_t n = w[i] | o.w[i];
      changed |= n != w[i];
      w[i] = n;
    }
    return changed;
  }
  bool operator==(const ByteSet& o) const { return memcmp(w, o.w, sizeof w) == 0; }
  // A member to show in example strings: printable ASCII first, else the lowest; -1 if empty.
  int pick() const {
    for (unsigned b = 0x20; b < 0x7F; ++b)
      if (has(static_cast<uint8_t>(b))) return static_cast<int>(b);
    for (unsigned b = 0; b < 256; ++b)
      if (has(static_cast<uint8_t>(b))) return static_cast<int>(b);
    return -1;
  }
};

enum class Op : uint8_t { End, Bytes, Rule };

struct Elem {
  Op op = Op::End;
  uint32_t arg = 0;  // Bytes: index of the byte set; Rule: rule index
};

class Grammar;

namespace detail {

// A grammar while it is being parsed: rule -> alternatives -> elements.
struct Draft {
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<Elem>>> rules;
  std::vector<bool> defined;
  std::vector<size_t> first_use;  // text offset of the first reference, for "undefined" errors
  std::vector<ByteSet> sets;
  std::unordered_map<std::string, uint32_t> by_name;
  std::unordered_map<std::string, uint32_t> helper_count;
  uint32_t any_char = UINT32_MAX;  // the helper rule of `.`, made once

  uint32_t rule(std::string_view name, size_t where) {
    auto it = by_name.find(std::string(name));
    if (it != by_name.end()) return it->second;
    uint32_t r = static_cast<uint32_t>(names.size());
    names.emplace_back(name);
    rules.emplace_back();
    defined.push_back(false);
    first_use.push_back(where);
    by_name.emplace(std::string(name), r);
    return r;
  }
  // An anonymous helper rule named after the rule it serves (object_3, value_1, ...).
  uint32_t helper(uint32_t parent) {
    const std::string base = names[parent];
    for (;;) {
      std::string name = base + "_" + std::to_string(++helper_count[base]);
      if (by_name.count(name)) continue;
      uint32_t r = rule(name, SIZE_MAX);
      defined[r] = true;
      return r;
    }
  }
  Elem bytes(const ByteSet& s) {
    for (size_t i = 0; i < sets.size(); ++i)
      if (sets[i] == s) return {Op::Bytes, static_cast<uint32_t>(i)};
    sets.push_back(s);
    return {Op::Bytes, static_cast<uint32_t>(sets.size() - 1)};
  }
};

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;  // one (lo, hi) per byte

// Splits the code points [lo, hi] into UTF-8 byte-range sequences: each sequence matches the
// encodings of a sub-range exactly (the classic construction used by regex engines: cut at the
// encoding-length boundaries, then where a continuation byte would not span 80..BF).
inline void utf8_ranges(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates have no UTF-8 encoding
    if (lo < 0xD800) utf8_ranges(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_ranges(0xE000, hi, out);
    return;
  }
  static const uint32_t kMaxOfLength[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t m : kMaxOfLength)
    if (lo <= m && hi > m) {
      utf8_ranges(lo, m, out);
      utf8_ranges(m + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int len = hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < len; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_ranges(lo, lo | m, out);
        utf8_ranges((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_ranges(lo, (hi & ~m) - 1, out);
        utf8_ranges(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteRanges seq;
  for (size_t i = 0; i < a.size(); ++i)
    seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(seq);
}

// Recursive-descent GBNF parser filling a Draft. Errors keep the first message and offset.
class GbnfParser {
 public:
  GbnfParser(std::string_view text, Draft* d) : t_(text), d_(d) {}

  bool run() {
    skip_space();
    if (at_ >= t_.size()) return fail("the grammar has no rules", at_);
    while (at_ < t_.size()) {
      size_t start = at_;
      std::string name;
      if (!ident(&name)) return fail("expected a rule name", at_);
      skip_space();
      if (t_.substr(at_, 3) != "::=")
        return fail("expected '::=' after rule name '" + name + "'", at_);
      at_ += 3;
      uint32_t r = d_->rule(name, start);
      if (d_->defined[r]) return fail("rule '" + name + "' is defined twice", start);
      d_->defined[r] = true;
      std::vector<std::vector<Elem>> alts;
      if (!alternates(r, &alts, 0)) return false;
      d_->rules[r] = std::move(alts);
      skip_space();
      if (peek() == ')') return fail("unexpected ')' (no '(' to close)", at_);
    }
    for (size_t r = 0; r < d_->names.size(); ++r)
      if (!d_->defined[r]) return fail("undefined rule '" + d_->names[r] + "'", d_->first_use[r]);
    return true;
  }

  const std::string& error() const { return err_; }
  size_t error_at() const { return err_at_; }

 private:
  static constexpr uint32_t kInf = UINT32_MAX;
  static constexpr uint32_t kMaxRepeat = 1000;
  static constexpr uint64_t kMaxExpanded = 100000;
  uint64_t expanded_ = 0;  // elements the repetitions so far expanded to

  bool fail(const std::string& msg, size_t where) {
    if (err_.empty()) {
      err_ = msg;
      err_at_ = where;
    }
    return false;
  }
  bool more() const { return at_ < t_.size(); }
  char peek(size_t ahead = 0) const { return at_ + ahead < t_.size() ? t_[at_ + ahead] : '\0'; }
  static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  }

  void skip_space() {
    while (more()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++at_;
      } else if (c == '#') {
        while (more() && peek() != '\n') ++at_;
      } else {
        break;
      }
    }
  }

  bool ident(std::string* name) {
    size_t s = at_;
    while (more() && ident_char(peek())) ++at_;
    if (at_ == s) return false;
    *name = std::string(t_.substr(s, at_ - s));
    return true;
  }

  // True if the text at the cursor is `name ::=` (the next rule starts); does not move.
  bool at_rule_start() const {
    size_t i = at_;
    while (i < t_.size() && ident_char(t_[i])) ++i;
    if (i == at_) return false;
    while (i < t_.size() && (t_[i] == ' ' || t_[i] == '\t' || t_[i] == '\n' || t_[i] == '\r')) ++i;
    return t_.substr(i, 3) == "::=";
  }

  bool alternates(uint32_t rule, std::vector<std::vector<Elem>>* alts, int depth) {
    for (;;) {
      std::vector<Elem> seq;
      if (!sequence(rule, &seq, depth)) return false;
      alts->push_back(std::move(seq));
      skip_space();
      if (peek() != '|') return true;
      ++at_;
    }
  }

  bool sequence(uint32_t rule, std::vector<Elem>* seq, int depth) {
    for (;;) {
      skip_space();
      if (!more() || peek() == '|' || peek() == ')') return true;
      if (depth == 0 && at_rule_start()) return true;
      std::vector<Elem> atom;
      if (!parse_atom(rule, &atom, depth)) return false;
      skip_space();
      // Postfix operators apply left to right. Directly stacked ones made of ?, * and + are
      // merged first (x++ = x+, x+* = x*, x?? = x?, ...: lo multiplies, hi is infinite if
      // either is): each would otherwise nest a repetition in a repetition, and a run of them
      // (`x+++...`) made the matcher's stack sets explode.
      bool pending = false;
      uint32_t plo = 1, phi = 1;
      size_t pending_at = 0;
      auto simple = [](uint32_t lo, uint32_t hi) { return lo <= 1 && (hi == 1 || hi == kInf); };
      auto apply = [&]() {
        // Repetitions expand (a copy per required one, a rule per optional one): bound what a
        // short text can make, so no grammar costs more than a moment and a few MiB to analyse.
        expanded_ += plo + (phi == kInf ? 1 : phi - plo);
        if (expanded_ > kMaxExpanded)
          return fail("repetitions expand to more than " + std::to_string(kMaxExpanded) +
                          " elements; bound them less",
                      pending_at);
        Elem x = single(rule, atom);
        atom = repeat(rule, x, plo, phi);
        pending = false;
        return true;
      };
      while (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
        uint32_t lo = 0, hi = kInf;
        size_t op_at = at_;
        char op = t_[at_++];
        if (op == '+') lo = 1;
        if (op == '?') hi = 1;
        if (op == '{' && !bounds(&lo, &hi, op_at)) return false;
        if (pending && simple(plo, phi) && simple(lo, hi)) {
          plo *= lo;
          phi = phi == kInf || hi == kInf ? kInf : phi * hi;
        } else {
          if (pending && !apply()) return false;
          pending = true, plo = lo, phi = hi, pending_at = op_at;
        }
        skip_space();
      }
      if (pending && !apply()) return false;
      seq->insert(seq->end(), atom.begin(), atom.end());
    }
  }

  // {m}, {m,}, {m,n} after the '{'.
  bool bounds(uint32_t* lo, uint32_t* hi, size_t op_at) {
    auto number = [&](uint32_t* v) {
      size_t s = at_;
      uint64_t n = 0;
      while (more() && peek() >= '0' && peek() <= '9') {
        n = n * 10 + static_cast<uint64_t>(peek() - '0');
        if (n > kMaxRepeat) return fail("repetition bound above " + std::to_string(kMaxRepeat), s);
        ++at_;
      }
      if (at_ == s) return fail("expected a number in {m,n}", at_);
      *v = static_cast<uint32_t>(n);
      return true;
    };
    skip_space();
    if (!number(lo)) return false;
    skip_space();
    *hi = *lo;
    if (peek() == ',') {
      ++at_;
      skip_space();
      *hi = kInf;
      if (peek() != '}' && !number(hi)) return false;
      skip_space();
    }
    if (peek() != '}') return fail("expected '}' to close {m,n}", at_);
    ++at_;
    if (*hi < *lo) return fail("repetition {m,n} with n < m", op_at);
    return true;
  }

  // The atom as one element (a helper rule when it is a multi-byte literal).
  Elem single(uint32_t rule, const std::vector<Elem>& atom) {
    if (atom.size() == 1) return atom[0];
    uint32_t h = d_->helper(rule);
    d_->rules[h] = {atom};
    return {Op::Rule, h};
  }

  // x{lo,hi}: lo copies, then x* (hi infinite) or a chain of nested optionals R_k ::= x R_k-1 | ε
  // (nested rather than x? x? x?, which would keep k ambiguous stacks alive).
  std::vector<Elem> repeat(uint32_t rule, Elem x, uint32_t lo, uint32_t hi) {
    std::vector<Elem> out(lo, x);
    if (hi == kInf) {
      uint32_t star = d_->helper(rule);
      d_->rules[star] = {{x, {Op::Rule, star}}, {}};
      out.push_back({Op::Rule, star});
    } else if (hi > lo) {
      uint32_t prev = UINT32_MAX;
      for (uint32_t k = 0; k < hi - lo; ++k) {
        uint32_t r = d_->helper(rule);
        std::vector<Elem> first{x};
        if (prev != UINT32_MAX) first.push_back({Op::Rule, prev});
        d_->rules[r] = {first, {}};
        prev = r;
      }
      out.push_back({Op::Rule, prev});
    }
    return out;
  }

  bool parse_atom(uint32_t rule, std::vector<Elem>* atom, int depth) {
    char c = peek();
    if (c == '"') return literal(atom);
    if (c == '[') return char_class(rule, atom);
    if (c == '.') {
      ++at_;
      if (d_->any_char == UINT32_MAX) {
        d_->any_char = d_->helper(rule);
        d_->rules[d_->any_char] = class_alternatives({{0, 0x10FFFF}});
      }
      atom->push_back({Op::Rule, d_->any_char});
      return true;
    }
    if (c == '(') {
      size_t open = at_++;
      std::vector<std::vector<Elem>> alts;
      if (!alternates(rule, &alts, depth + 1)) return false;
      skip_space();
      if (peek() != ')') return fail("expected ')' to close the '(' here", open);
      ++at_;
      if (alts.size() == 1) {  // a plain sequence in parentheses: no helper needed
        *atom = alts[0];
        if (atom->size() == 1) return true;
      }
      uint32_t h = d_->helper(rule);
      d_->rules[h] = std::move(alts);
      atom->assign(1, {Op::Rule, h});
      return true;
    }
    if (ident_char(c)) {
      size_t where = at_;
      std::string name;
      ident(&name);
      atom->push_back({Op::Rule, d_->rule(name, where)});
      return true;
    }
    if (c == '\0' && !more()) return fail("unexpected end of grammar", at_);
    return fail(std::string("unexpected character '") + c + "'", at_);
  }

  // One character of a literal or class (an escape or a UTF-8 encoded code point).
  bool character(uint32_t* cp, char closing) {
    size_t s = at_;
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++at_;
      char e = peek();
      ++at_;
      switch (e) {
        case 'n':
          *cp = '\n';
          return true;
        case 'r':
          *cp = '\r';
          return true;
        case 't':
          *cp = '\t';
          return true;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '/':
        case '^':
          *cp = static_cast<uint8_t>(e);
          return true;
        case 'x':
          return hex(2, cp, s);
        case 'u':
          return hex(4, cp, s);
        case 'U':
          return hex(8, cp, s);
        default:
          if (e == '\0') return fail("unterminated escape", s);
          return fail(std::string("unknown escape '\\") + e + "'", s);
      }
    }
    if (c == '\n' || c == '\r')
      return fail(closing == '"' ? "unterminated string literal" : "unterminated character class",
                  s);
    // UTF-8 decoding of the grammar text itself.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || at_ + static_cast<size_t>(len) > t_.size())
      return fail("invalid UTF-8 in the grammar", s);
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int i = 1; i < len; ++i) {
      unsigned char k = static_cast<unsigned char>(t_[at_ + static_cast<size_t>(i)]);
      if ((k & 0xC0) != 0x80) return fail("invalid UTF-8 in the grammar", s);
      v = (v << 6) | (k & 0x3Fu);
    }
    if (v > 0x10FFFF) return fail("invalid UTF-8 in the grammar", s);
    at_ += static_cast<size_t>(len);
    *cp = v;
    return true;
  }

  bool hex(int digits, uint32_t* cp, size_t s) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char h = peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) return fail("expected " + std::to_string(digits) + " hex digits in the escape", s);
      v = v * 16 + static_cast<uint32_t>(d);
      ++at_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
      return fail("escape is not a Unicode scalar value", s);
    *cp = v;
    return true;
  }

  bool literal(std::vector<Elem>* atom) {
    size_t open = at_++;
    std::string bytes;
    for (;;) {
      if (!more()) return fail("unterminated string literal", open);
      if (peek() == '"') break;
      uint32_t cp;
      if (!character(&cp, '"')) return false;
      append_utf8(bytes, cp);
    }
    ++at_;
    for (unsigned char b : bytes) {
      ByteSet s;
      s.add(b);
      atom->push_back(d_->bytes(s));
    }
    return true;
  }

  // Alternatives matching the UTF-8 encodings of the given code-point ranges.
  std::vector<std::vector<Elem>> class_alternatives(
      const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<ByteRanges> seqs;
    for (auto [lo, hi] : ranges) utf8_ranges(lo, hi, seqs);
    std::vector<std::vector<Elem>> alts;
    ByteSet ascii;
    bool any_ascii = false;
    for (const ByteRanges& seq : seqs) {
      if (seq.size() == 1) {
        ascii.add_range(seq[0].first, seq[0].second);
        any_ascii = true;
        continue;
      }
      std::vector<Elem> alt;
      for (auto [lo, hi] : seq) {
        ByteSet s;
        s.add_range(lo, hi);
        alt.push_back(d_->bytes(s));
      }
      alts.push_back(std::move(alt));
    }
    if (any_ascii) alts.insert(alts.begin(), std::vector<Elem>{d_->bytes(ascii)});
    return alts;
  }

  bool char_class(uint32_t rule, std::vector<Elem>* atom) {
    size_t open = at_++;
    bool negate = peek() == '^';
    if (negate) ++at_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    for (;;) {
      if (!more()) return fail("unterminated character class", open);
      if (peek() == ']') break;
      uint32_t lo, hi;
      if (!character(&lo, ']')) return false;
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && at_ + 1 < t_.size()) {
        ++at_;
        size_t s = at_;
        if (!character(&hi, ']')) return false;
        if (hi < lo) return fail("character range is reversed", s);
      }
      ranges.emplace_back(lo, hi);
    }
    ++at_;
    if (ranges.empty()) return fail("empty character class", open);
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (auto r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    if (negate) {
      std::vector<std::pair<uint32_t, uint32_t>> comp;
      uint32_t next = 0;
      for (auto [lo, hi] : merged) {
        if (lo > next) comp.emplace_back(next, lo - 1);
        next = hi + 1;
      }
      if (next <= 0x10FFFF) comp.emplace_back(next, 0x10FFFF);
      merged = comp;
      if (merged.empty()) return fail("character class matches nothing", open);
    }
    std::vector<std::vector<Elem>> alts = class_alternatives(merged);
    if (alts.empty()) return fail("character class matches nothing", open);
    if (alts.size() == 1 && alts[0].size() == 1) {  // ASCII only: one byte-set element
      atom->push_back(alts[0][0]);
      return true;
    }
    uint32_t h = d_->helper(rule);
    d_->rules[h] = std::move(alts);
    atom->push_back({Op::Rule, h});
    return true;
  }

  std::string_view t_;
  Draft* d_;
  size_t at_ = 0;
  std::string err_;
  size_t err_at_ = 0;
};

}  // namespace detail

// A compiled grammar (see the file comment for the element layout).
class Grammar {
 public:
  // Compiles GBNF text with start rule `root`. On failure returns false and sets *error to
  // "line L, column C: what" (the grammar is left unchanged).
  static bool parse(std::string_view text, Grammar* out, std::string* error,
                    std::string_view root = "root") {
    detail::Draft d;
    detail::GbnfParser p(text, &d);
    auto located = [&](const std::string& msg, size_t at) {
      size_t line = 1, col = 1;
      for (size_t i = 0; i < at && i < text.size(); ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      if (error)
        *error = "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + msg;
      return false;
    };
    if (!p.run()) return located(p.error(), p.error_at());
    auto it = d.by_name.find(std::string(root));
    if (it == d.by_name.end()) {
      if (error) *error = "the grammar has no rule '" + std::string(root) + "'";
      return false;
    }
    Grammar g;
    g.root_ = it->second;
    g.names_ = d.names;
    g.sets_ = d.sets;
    for (size_t r = 0; r < d.rules.size(); ++r) {
      g.alts_.emplace_back();
      for (const auto& alt : d.rules[r]) {
        g.alts_[r].push_back(static_cast<uint32_t>(g.elems_.size()));
        for (const Elem& e : alt) {
          g.elems_.push_back(e);
          g.rule_of_.push_back(static_cast<uint32_t>(r));
        }
        g.elems_.push_back({Op::End, 0});
        g.rule_of_.push_back(static_cast<uint32_t>(r));
      }
    }
    std::string why;
    size_t why_at = SIZE_MAX;  // SIZE_MAX: the problem has no single place in the text
    if (!g.analyse(&why, d, &why_at)) {
      if (why_at != SIZE_MAX) return located(why, why_at);
      if (error) *error = why;
      return false;
    }
    *out = std::move(g);
    return true;
  }

  uint32_t root() const { return root_; }
  size_t rule_count() const { return alts_.size(); }
  const std::string& rule_name(uint32_t r) const { return names_[r]; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alts_[rule]; }
  size_t size() const { return elems_.size(); }  // positions
  const Elem& at(uint32_t pos) const { return elems_[pos]; }
  uint32_t rule_of(uint32_t pos) const { return rule_of_[pos]; }
  const ByteSet& bytes(uint32_t set) const { return sets_[set]; }
  bool nullable(uint32_t rule) const { return nullable_[rule]; }
  // Bytes that can come right after `rule` in some derivation from the root.
  const ByteSet& follow(uint32_t rule) const { return follow_[rule]; }
  // Completions longer than this many bytes are not spelled out (no token budget reaches them,
  // and nested repetitions could make them astronomically long).
  static constexpr size_t kMaxTail = size_t{1} << 20;
  // A shortest byte string that finishes the alternative from `pos` to its End, expanded on
  // demand; when it is longer than kMaxTail, its first kMaxTail + 1 bytes (the size says so).
  std::string min_tail(uint32_t pos) const {
    std::string out;
    std::vector<uint32_t> todo{pos};  // positions still to expand, innermost last
    while (!todo.empty() && out.size() <= kMaxTail) {
      const uint32_t p = todo.back();
      if (elems_[p].op == Op::End) {
        todo.pop_back();
        continue;
      }
      ++todo.back();
      if (elems_[p].op == Op::Bytes)
        out += static_cast<char>(sets_[elems_[p].arg].pick());
      else
        todo.push_back(best_[elems_[p].arg]);
    }
    if (out.size() > kMaxTail) out.resize(kMaxTail + 1);
    return out;
  }

 private:
  // Calls step(i) for i in [0, n) until a whole pass changes nothing, alternating the direction
  // of the passes: a chain of rules that each refer to the next one (a bounded repetition
  // expands into one) settles in two passes whichever way it points, not in one per link.
  template <typename Step>
  static void fixpoint(size_t n, Step&& step) {
    for (bool changed = true, forward = true; changed; forward = !forward) {
      changed = false;
      for (size_t k = 0; k < n; ++k) changed |= step(forward ? k : n - 1 - k);
    }
  }

  bool analyse(std::string* why, const detail::Draft& d, size_t* why_at) {
    const size_t R = alts_.size();
    // Nullable rules.
    nullable_.assign(R, false);
    fixpoint(R, [&](size_t r) {
      if (nullable_[r]) return false;
      for (uint32_t a : alts_[r])
        if (seq_nullable(a)) {
          nullable_[r] = true;
          return true;
        }
      return false;
    });
    // Shortest derivation length per rule (Bellman-Ford with strict improvements only, so
    // the chosen alternatives never form a cycle), saturating at kInf.
    const uint64_t kInf = UINT64_MAX / 4;
    std::vector<uint64_t> minlen(R, kInf);
    best_.assign(R, UINT32_MAX);
    std::vector<uint32_t>& best = best_;
    fixpoint(R, [&](size_t r) {
      bool changed = false;
      for (uint32_t a : alts_[r]) {
        uint64_t len = 0;
        for (uint32_t p = a; elems_[p].op != Op::End && len < kInf; ++p)
          len += elems_[p].op == Op::Bytes ? 1 : minlen[elems_[p].arg];
        if (len < minlen[r]) {
          minlen[r] = len;
          best[r] = a;
          changed = true;
        }
      }
      return changed;
    });
    for (size_t r = 0; r < R; ++r)
      if (minlen[r] >= kInf) {
        *why = "rule '" + names_[r] + "' derives no finite string (every alternative recurses)";
        if (r < d.first_use.size() && d.first_use[r] != SIZE_MAX) *why_at = d.first_use[r];
        return false;
      }
    // Left recursion: R -> S when S can be the first thing R matches (after nullable elements).
    std::vector<std::vector<uint32_t>> left(R);
    for (size_t r = 0; r < R; ++r)
      for (uint32_t a : alts_[r])
        for (uint32_t p = a; elems_[p].op == Op::Rule; ++p) {
          left[r].push_back(elems_[p].arg);
          if (!nullable_[elems_[p].arg]) break;
        }
    std::vector<int> color(R, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    std::string cycle;
    auto dfs = [&](auto&& self, uint32_t r) -> bool {
      color[r] = 1;
      path.push_back(r);
      for (uint32_t s : left[r]) {
        if (color[s] == 1) {
          size_t i = std::find(path.begin(), path.end(), s) - path.begin();
          for (; i < path.size(); ++i) cycle += names_[path[i]] + " -> ";
          cycle += names_[s];
          return false;
        }
        if (color[s] == 0 && !self(self, s)) return false;
      }
      path.pop_back();
      color[r] = 2;
      return true;
    };
    for (uint32_t r = 0; r < R; ++r)
      if (color[r] == 0 && !dfs(dfs, r)) {
        *why =
            "left recursion: " + cycle + " (rewrite it with repetition, e.g. a ::= b (\"+\" b)*)";
        return false;
      }
    // FIRST and FOLLOW byte sets.
    std::vector<ByteSet> first(R);
    fixpoint(R, [&](size_t r) {
      bool changed = false;
      for (uint32_t a : alts_[r]) changed |= first[r].merge(seq_first(a, first));
      return changed;
    });
    follow_.assign(R, ByteSet{});
    fixpoint(elems_.size(), [&](size_t p) {
      if (elems_[p].op != Op::Rule) return false;
      uint32_t s = elems_[p].arg;
      bool changed = follow_[s].merge(seq_first(p + 1, first));
      if (seq_nullable(p + 1)) changed |= follow_[s].merge(follow_[rule_of_[p]]);
      return changed;
    });
    return true;
  }

  bool seq_nullable(uint32_t p) const {
    for (; elems_[p].op != Op::End; ++p)
      if (elems_[p].op == Op::Bytes || !nullable_[elems_[p].arg]) return false;
    return true;
  }
  ByteSet seq_first(uint32_t p, const std::vector<ByteSet>& first) const {
    ByteSet s;
    for (; elems_[p].op != Op::End; ++p) {
      if (elems_[p].op == Op::Bytes) {
        s.merge(sets_[elems_[p].arg]);
        return s;
      }
      s.merge(first[elems_[p].arg]);
      if (!nullable_[elems_[p].arg]) return s;
    }
    return s;
  }

  uint32_t root_ = 0;
  std::vector<std::string> names_;
  std::vector<std::vector<uint32_t>> alts_;  // rule -> start positions of its alternatives
  std::vector<Elem> elems_;
  std::vector<uint32_t> rule_of_;  // position -> rule
  std::vector<ByteSet> sets_;
  std::vector<bool> nullable_;
  std::vector<ByteSet> follow_;
  std::vector<uint32_t> best_;  // rule -> the start of a shortest alternative
};

// JSON (RFC 8259) for generation: any value at the top, strings of valid UTF-8 without control
// characters, escapes, numbers without leading zeros. Whitespace between tokens is limited to
// one space or a newline with up to 8 blanks of indentation, so a model cannot pad forever.
inline const char* json_gbnf() {
  return R"gbnf(root   ::= ws value
value  ::= ( object | array | string | number | "true" | "false" | "null" ) ws
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( "," ws value )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= ( " " | "\n" [ \t]{0,8} )?
)gbnf";
}

}  // namespace pith::grammar
