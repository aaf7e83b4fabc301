// ECMA-262 regular expressions as GBNF over JSON string text (see json_schema_pattern.h).
//
// The pattern is parsed into a tree of character sets, concatenations, alternations and
// repetitions (nothing else survives: every supported construct is one of those), the JSON
// Schema's implicit "anywhere in the string" becomes a free repetition of any character on the
// unanchored sides, and each set is written as the JSON spellings of its characters.
#include "server/json_schema_pattern.h"

#include "server/json_schema_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace pith::server {

namespace {

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxCount = 1000;  // the GBNF parser's largest {m,n} bound
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxDepth = 64;  // group nesting: the parser and the tree recurse per level

// A set of code points: sorted, disjoint, non-adjacent closed ranges.
using CodeSet = std::vector<std::pair<uint32_t, uint32_t>>;

CodeSet normalized(CodeSet s) {
  std::sort(s.begin(), s.end());
  CodeSet out;
  for (const auto& r : s) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

CodeSet complement(const CodeSet& s) {
  CodeSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : s) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

CodeSet minus(const CodeSet& a, const CodeSet& b) {
  CodeSet nb = complement(b), out;
  for (const auto& x : a)
    for (const auto& y : nb) {
      const uint32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalized(out);
}

const CodeSet kDigits = {{'0', '9'}};
const CodeSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMA-262 WhiteSpace and LineTerminator.
const CodeSet kSpace = normalized({{0x09, 0x0D},
                                   {0x20, 0x20},
                                   {0xA0, 0xA0},
                                   {0x1680, 0x1680},
                                   {0x2000, 0x200A},
                                   {0x2028, 0x2029},
                                   {0x202F, 0x202F},
                                   {0x205F, 0x205F},
                                   {0x3000, 0x3000},
                                   {0xFEFF, 0xFEFF}});
const CodeSet kLineTerminators = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
const CodeSet kSurrogates = {{0xD800, 0xDFFF}};  // never in a UTF-8 JSON string

uint64_t add(uint64_t a, uint64_t b) {
  return a > kUnbounded - b ? kUnbounded : a + b;
}
uint64_t mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kUnbounded / b ? kUnbounded : a * b;
}

[[noreturn]] void unsupported(const std::string& what) {
  throw PatternError(what, true);
}
[[noreturn]] void malformed(const std::string& what) {
  throw PatternError(what, false);
}

}  // namespace

struct StringPattern::Node {
  enum class Kind { Chars, Concat, Alt, Repeat } kind = Kind::Concat;
  CodeSet set;              // Chars
  std::vector<Node> kids;   // Concat, Alt; Repeat: one
  uint64_t lo = 0, hi = 0;  // Repeat; hi kUnbounded: no upper bound

  static Node chars(CodeSet s) {
    Node n;
    n.kind = Kind::Chars;
    n.set = normalized(std::move(s));
    return n;
  }
  // kid{lo,hi}. A kid that matches the empty string repeats without it (the grammar
  // compiler refuses x* of a nullable x: it would recurse without consuming input).
  static Node repeat(Node kid, uint64_t lo, uint64_t hi) {
    Node n;
    if (hi == 0) return n;  // an empty concatenation: only the empty string
    if (kid.min_len() == 0) {
      if (!kid.drop_empty()) return n;
      lo = 0;
    }
    n.kind = Kind::Repeat;
    n.kids.push_back(std::move(kid));
    n.lo = lo;
    n.hi = hi;
    return n;
  }

  uint64_t min_len() const {
    switch (kind) {
      case Kind::Chars:
        return 1;
      case Kind::Repeat:
        return mul(lo, kids[0].min_len());
      case Kind::Alt: {
        uint64_t m = kUnbounded;
        for (const Node& k : kids) m = std::min(m, k.min_len());
        return m;
      }
      case Kind::Concat: {
        uint64_t m = 0;
        for (const Node& k : kids) m = add(m, k.min_len());
        return m;
      }
    }
    return 0;
  }
  // cap: the count an unbounded repetition stops at (kUnbounded: none).
  uint64_t max_len(uint64_t cap = kUnbounded) const {
    switch (kind) {
      case Kind::Chars:
        return 1;
      case Kind::Repeat: {
        const uint64_t k = kids[0].max_len(cap);
        if (k == 0) return 0;
        return mul(hi == kUnbounded ? std::max(lo, cap) : hi, k);
      }
      case Kind::Alt: {
        uint64_t m = 0;
        for (const Node& k : kids) m = std::max(m, k.max_len(cap));
        return m;
      }
      case Kind::Concat: {
        uint64_t m = 0;
        for (const Node& k : kids) m = add(m, k.max_len(cap));
        return m;
      }
    }
    return 0;
  }
  // The same strings without the empty one; false when that leaves none.
  bool drop_empty() {
    if (min_len() > 0) return true;
    switch (kind) {
      case Kind::Chars:
        return true;
      case Kind::Repeat:  // (x\e){1,hi}: a nullable x's copies may as well be non-empty
        if (!kids[0].drop_empty()) return false;
        lo = 1;
        return true;
      case Kind::Alt: {
        std::vector<Node> kept;
        for (Node& k : kids)
          if (k.drop_empty()) kept.push_back(std::move(k));
        kids = std::move(kept);
        return !kids.empty();
      }
      case Kind::Concat: {  // every part nullable: the first non-empty part is k_i\e
        Node alt;
        alt.kind = Kind::Alt;
        for (size_t i = 0; i < kids.size(); ++i) {
          Node first = kids[i];
          if (!first.drop_empty()) continue;
          Node seq;
          seq.kind = Kind::Concat;
          seq.kids.push_back(std::move(first));
          seq.kids.insert(seq.kids.end(), kids.begin() + i + 1, kids.end());
          alt.kids.push_back(std::move(seq));
        }
        if (alt.kids.empty()) return false;
        *this = std::move(alt);
        return true;
      }
    }
    return false;
  }
  void apply_cap(uint64_t cap) {
    for (Node& k : kids) k.apply_cap(cap);
    if (kind == Kind::Repeat && hi == kUnbounded) hi = std::max(lo, cap);
  }
};

namespace {

using Node = StringPattern::Node;
using json_schema_rules::repeated;

// Recursive descent over the pattern's code points (ECMA-262 syntax with Annex B's leniency
// for a '{', '}' or ']' that starts nothing).
class Parser {
 public:
  explicit Parser(const std::string& utf8) : cps_(decode(utf8)) {}

  // Top level: the alternatives, each with its anchors applied.
  std::vector<Node> run() {
    std::vector<Node> alts;
    for (;;) {
      bool start = false, end = false;
      if (peek() == '^') {
        start = true;
        ++i_;
      }
      Node alt = alternative(0, &end);
      if (!start) alt.kids.insert(alt.kids.begin(), any_repeat());
      if (!end) alt.kids.push_back(any_repeat());
      alts.push_back(std::move(alt));
      if (at_end()) break;
      if (peek() == ')') malformed("an unmatched ')'");
      ++i_;  // '|'
    }
    return alts;
  }

 private:
  static Node any_repeat() {
    return Node::repeat(Node::chars({{0, kMaxCodePoint}}), 0, kUnbounded);
  }

  static std::vector<uint32_t> decode(const std::string& s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      if (n == 0 || i + n > s.size()) malformed("it is not valid UTF-8");
      uint32_t cp = n == 1 ? c : c & (0x7F >> n);
      for (int k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b >> 6) != 2) malformed("it is not valid UTF-8");
        cp = (cp << 6) | (b & 0x3F);
      }
      out.push_back(cp);
      i += n;
    }
    return out;
  }

  bool at_end() const { return i_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return i_ + ahead < cps_.size() ? cps_[i_ + ahead] : 0xFFFFFFFF;
  }
  uint32_t take() {
    if (at_end()) malformed("it ends inside an escape or class");
    return cps_[i_++];
  }

  Node disjunction(int depth) {
    Node alt;
    alt.kind = Node::Kind::Alt;
    for (;;) {
      alt.kids.push_back(alternative(depth, nullptr));
      if (peek() != '|') break;
      ++i_;
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  // Terms up to '|', ')' or the end. end_anchor: where a top-level '$' may end the alternative.
  Node alternative(int depth, bool* end_anchor) {
    Node seq;
    seq.kind = Node::Kind::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const uint32_t c = peek();
      if (c == '^')
        unsupported("'^' anchors only the start of the pattern or of a top-level '|' branch");
      if (c == '$') {
        ++i_;
        if (end_anchor && (at_end() || peek() == '|' || peek() == ')')) {
          *end_anchor = true;
          break;
        }
        unsupported("'$' anchors only the end of the pattern or of a top-level '|' branch");
      }
      Node a = atom(depth);
      quantified(std::move(a), seq);
    }
    return seq;
  }

  void quantified(Node a, Node& seq) {
    uint64_t lo = 0, hi = 0;
    if (!quantifier(&lo, &hi)) {
      seq.kids.push_back(std::move(a));
      return;
    }
    if (peek() == '?') ++i_;  // lazy: the same strings
    const size_t before = i_;
    uint64_t l2, h2;
    if (quantifier(&l2, &h2)) {
      i_ = before;
      malformed("a quantifier follows a quantifier (nothing to repeat)");
    }
    seq.kids.push_back(Node::repeat(std::move(a), lo, hi));
  }

  // * + ? {n} {n,} {n,m}; false (and nothing consumed) if none starts here.
  bool quantifier(uint64_t* lo, uint64_t* hi) {
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      *lo = c == '+' ? 1 : 0;
      *hi = c == '?' ? 1 : kUnbounded;
      return true;
    }
    if (c != '{') return false;
    size_t j = i_ + 1;
    auto number = [&](uint64_t* v) {
      const size_t from = j;
      *v = 0;
      while (j < cps_.size() && cps_[j] >= '0' && cps_[j] <= '9') {
        *v = std::min<uint64_t>(*v * 10 + (cps_[j] - '0'), 1'000'000'000);
        ++j;
      }
      return j > from;
    };
    uint64_t a = 0, b = 0;
    if (!number(&a)) return false;
    bool upper = true;
    if (j < cps_.size() && cps_[j] == ',') {
      ++j;
      upper = number(&b);
      if (!upper) b = kUnbounded;
    } else {
      b = a;
    }
    if (j >= cps_.size() || cps_[j] != '}') return false;  // Annex B: a literal '{'
    i_ = j + 1;
    if (b < a) malformed(fmt::format("the count {{{},{}}} is out of order", a, b));
    if (a > kMaxCount || (b != kUnbounded && b > kMaxCount))
      unsupported(fmt::format("counts above {}", kMaxCount));
    *lo = a;
    *hi = b;
    return true;
  }

  Node atom(int depth) {
    const uint32_t c = take();
    switch (c) {
      case '.':
        return Node::chars(complement(kLineTerminators));
      case '[':
        return char_class();
      case '\\':
        return escape();
      case '(':
        return group(depth);
      case '*':
      case '+':
      case '?':
        malformed(fmt::format("'{}' has nothing to repeat", static_cast<char>(c)));
      case '{': {
        --i_;
        uint64_t lo, hi;
        if (quantifier(&lo, &hi)) malformed("a count has nothing to repeat");
        ++i_;
        return Node::chars({{c, c}});
      }
      default:
        return Node::chars({{c, c}});
    }
  }

  Node group(int depth) {
    if (depth >= kMaxDepth) unsupported(fmt::format("groups nested more than {} deep", kMaxDepth));
    if (peek() == '?') {
      ++i_;
      const uint32_t k = take();
      if (k == '=' || k == '!') unsupported("lookahead assertions");
      if (k == '<' && (peek() == '=' || peek() == '!')) unsupported("lookbehind assertions");
      if (k == '<') {  // a named group: the name does not change what matches
        while (!at_end() && peek() != '>') ++i_;
        if (at_end()) malformed("a group name has no closing '>'");
        ++i_;
      } else if (k != ':') {
        malformed("'(?' starts no known group");
      }
    }
    Node inner = disjunction(depth + 1);
    if (peek() != ')') malformed("a '(' is not closed");
    ++i_;
    return inner;
  }

  static int hex(uint32_t c) {
    if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
    return -1;
  }
  // n hex digits at the cursor, or nullopt (nothing consumed).
  std::optional<uint32_t> hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const int d = hex(peek(k));
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    i_ += n;
    return v;
  }

  // After '\' (outside or inside a class): a set for \d \D \w \W \s \S, else one code point.
  CodeSet escape_set(bool in_class) {
    const uint32_t e = take();
    switch (e) {
      case 'd':
        return kDigits;
      case 'D':
        return complement(kDigits);
      case 'w':
        return kWord;
      case 'W':
        return complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return complement(kSpace);
      case 'f':
        return {{0x0C, 0x0C}};
      case 'n':
        return {{0x0A, 0x0A}};
      case 'r':
        return {{0x0D, 0x0D}};
      case 't':
        return {{0x09, 0x09}};
      case 'v':
        return {{0x0B, 0x0B}};
      case 'b':
        if (in_class) return {{0x08, 0x08}};
        unsupported("word boundaries (\\b)");
      case 'B':
        unsupported("word boundaries (\\B)");
      case 'p':
      case 'P':
        unsupported("Unicode property escapes (\\p{...})");
      case 'k':
        if (peek() == '<') unsupported("backreferences");
        return {{e, e}};
      case '0':
        if (peek() >= '0' && peek() <= '9') unsupported("octal escapes");
        return {{0, 0}};
      case 'c': {
        const uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++i_;
          return {{l % 32, l % 32}};
        }
        malformed("'\\c' needs a letter after it");
      }
      case 'x': {
        if (auto v = hex_digits(2)) return {{*v, *v}};
        return {{'x', 'x'}};
      }
      case 'u': {
        if (peek() == '{') {
          ++i_;
          uint32_t v = 0;
          int n = 0;
          while (hex(peek()) >= 0 && v <= kMaxCodePoint) v = v * 16 + hex(take()), ++n;
          if (n == 0 || peek() != '}' || v > kMaxCodePoint) malformed("a bad '\\u{...}' escape");
          ++i_;
          return {{v, v}};
        }
        auto v = hex_digits(4);
        if (!v) return {{'u', 'u'}};
        if (*v >= 0xD800 && *v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t at = i_;
          i_ += 2;
          auto low = hex_digits(4);
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
            const uint32_t cp = 0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00);
            return {{cp, cp}};
          }
          i_ = at;
        }
        return {{*v, *v}};
      }
      default:
        if (e >= '1' && e <= '9') unsupported("backreferences");
        return {{e, e}};  // an escaped syntax character, or an identity escape
    }
  }

  Node escape() { return Node::chars(escape_set(false)); }

  Node char_class() {
    const bool negated = peek() == '^';
    if (negated) ++i_;
    CodeSet set;
    // One class atom: a set (from \d etc.) or a single code point (returned as one range).
    auto class_atom = [&](bool* single) -> CodeSet {
      const uint32_t c = take();
      if (c != '\\') {
        *single = true;
        return {{c, c}};
      }
      CodeSet s = escape_set(true);
      *single = s.size() == 1 && s[0].first == s[0].second;
      return s;
    };
    for (;;) {
      if (at_end()) malformed("a '[' is not closed");
      if (peek() == ']') {
        ++i_;
        break;
      }
      bool single_a = false;
      CodeSet a = class_atom(&single_a);
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++i_;
        bool single_b = false;
        CodeSet b = class_atom(&single_b);
        if (single_a && single_b) {
          if (a[0].first > b[0].first) malformed("a class range is out of order");
          set.emplace_back(a[0].first, b[0].first);
        } else {  // Annex B: a '-' beside a class escape is itself
          set.insert(set.end(), a.begin(), a.end());
          set.emplace_back('-', '-');
          set.insert(set.end(), b.begin(), b.end());
        }
        continue;
      }
      set.insert(set.end(), a.begin(), a.end());
    }
    set = normalized(set);
    return Node::chars(negated ? complement(set) : set);
  }

  std::vector<uint32_t> cps_;
  size_t i_ = 0;
};

// A code point inside a GBNF class: printable ASCII as itself (escaping the class's own
// syntax), the rest as fixed-width \u / \U escapes (parsers that read \x greedily, like
// xgrammar's, would take a following hex digit into \xHH).
std::string class_char(uint32_t c) {
  if (c == ']' || c == '\\' || c == '-' || c == '[')
    return std::string("\\") + static_cast<char>(c);
  if (c == '^') return "\\u005E";  // would negate the class as its first character
  if (c >= 0x20 && c <= 0x7E) return std::string(1, static_cast<char>(c));
  if (c <= 0xFFFF) return fmt::format("\\u{:04X}", c);
  return fmt::format("\\U{:08X}", c);
}

// The GBNF alternatives spelling each character of s in JSON string text.
std::vector<std::string> json_spellings(const CodeSet& s) {
  std::vector<std::string> alts;
  const CodeSet raw = minus(s, normalized({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  if (raw.size() == 1 && raw[0].first == raw[0].second && raw[0].first < 0x80) {
    alts.push_back("[" + class_char(raw[0].first) + "]");
  } else if (!raw.empty()) {
    std::string cls = "[";
    for (const auto& [lo, hi] : raw)
      cls += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
    alts.push_back(cls + "]");
  }
  auto has = [&](uint32_t c) {
    for (const auto& [lo, hi] : s)
      if (c >= lo && c <= hi) return true;
    return false;
  };
  if (has('"')) alts.push_back(R"("\\\"")");
  if (has('\\')) alts.push_back(R"("\\\\")");
  const std::pair<uint32_t, const char*> short_escapes[] = {
      {0x08, "b"}, {0x09, "t"}, {0x0A, "n"}, {0x0C, "f"}, {0x0D, "r"}};
  for (const auto& [c, e] : short_escapes)
    if (has(c)) alts.push_back(fmt::format(R"("\\{}")", e));
  for (uint32_t high = 0; high < 2; ++high) {  // \u00XX for the other control characters
    std::string digits;
    for (uint32_t low = 0; low < 16; ++low) {
      const uint32_t c = high * 16 + low;
      if (!has(c) || c == 0x08 || c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D) continue;
      digits += low < 10 ? std::string(1, static_cast<char>('0' + low))
                         : fmt::format("{}{}", static_cast<char>('a' + low - 10),
                                       static_cast<char>('A' + low - 10));
    }
    if (!digits.empty()) alts.push_back(fmt::format(R"("\\u00{}" [{}])", high, digits));
  }
  return alts;
}

class Emitter {
 public:
  explicit Emitter(const std::function<std::string(const std::string&)>& define)
      : define_(define) {}

  // An expression safe to follow with a postfix operator or another expression.
  std::string atom(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Chars:
        return chars(n.set);
      case Node::Kind::Repeat:
        return "( " + repeated(atom(n.kids[0]), n.lo, n.hi) + " )";
      case Node::Kind::Concat: {
        std::string out;
        for (const Node& k : n.kids) out += (out.empty() ? "" : " ") + atom(k);
        return out.empty() ? "\"\"" : "( " + out + " )";
      }
      case Node::Kind::Alt: {
        std::string out;
        for (const Node& k : n.kids) out += (out.empty() ? "" : " | ") + atom(k);
        return "( " + out + " )";
      }
    }
    return "\"\"";
  }

 private:
  std::string chars(const CodeSet& set) {
    const CodeSet s = minus(set, kSurrogates);
    auto known = rules_.find(s);
    if (known != rules_.end()) return known->second;
    const std::vector<std::string> alts = json_spellings(s);
    std::string out;
    if (alts.empty()) {
      malformed("a class in it matches no character");
    } else if (alts.size() == 1) {
      out = alts[0].find(' ') == std::string::npos ? alts[0] : "( " + alts[0] + " )";
    } else {
      std::string body;
      for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
      out = define_(body);
    }
    rules_.emplace(s, out);
    return out;
  }

  const std::function<std::string(const std::string&)>& define_;
  std::map<CodeSet, std::string> rules_;
};

// Raises the last unbounded repetition of alt (a concatenation) so no match is shorter than lo;
// false if alt has none that can.
bool raise_to(Node& alt, uint64_t lo) {
  const uint64_t have = alt.min_len();
  if (have >= lo) return true;
  for (size_t i = alt.kids.size(); i-- > 0;) {
    Node& r = alt.kids[i];
    if (r.kind != Node::Kind::Repeat || r.hi != kUnbounded) continue;
    const uint64_t piece = r.kids[0].min_len();
    if (piece == 0) continue;
    const uint64_t more = (lo - have + piece - 1) / piece;
    if (r.lo + more > kMaxCount) return false;
    r.lo += more;
    return true;
  }
  return false;
}

// Exact intersection with lengths lo..hi when at most one part of alt varies in length and it
// repeats a fixed-length piece. Returns false if alt is not of that form; *empty: no match of
// alt has such a length.
bool limit_exactly(Node& alt, uint64_t lo, uint64_t hi, bool* empty) {
  uint64_t fixed = 0;
  Node* variable = nullptr;
  for (Node& k : alt.kids) {
    const uint64_t a = k.min_len(), b = k.max_len();
    if (a == b) {
      fixed = add(fixed, a);
      continue;
    }
    if (variable) return false;
    variable = &k;
  }
  if (!variable) {
    *empty = fixed < lo || fixed > hi;
    return true;
  }
  if (variable->kind != Node::Kind::Repeat) return false;
  const uint64_t piece = variable->kids[0].min_len();
  if (piece == 0 || piece != variable->kids[0].max_len()) return false;
  // fixed + piece * n within [lo, hi]
  const uint64_t n_lo = lo > fixed ? (lo - fixed + piece - 1) / piece : 0;
  const uint64_t n_hi = hi == kUnbounded ? kUnbounded : hi >= fixed ? (hi - fixed) / piece : 0;
  const uint64_t new_lo = std::max(variable->lo, n_lo);
  const uint64_t new_hi = std::min(variable->hi, n_hi);
  *empty = hi < fixed || new_lo > new_hi;
  if (*empty) return true;
  if (new_lo > kMaxCount) return false;
  variable->lo = new_lo;
  // Above the grammar's largest count the bound is kMaxCount: a subset of the lengths.
  variable->hi = new_hi == kUnbounded ? kUnbounded : std::min(new_hi, kMaxCount);
  return true;
}

// Caps alt's unbounded repetitions so no match is longer than hi; false if no cap does.
bool cap_to(Node& alt, uint64_t hi) {
  if (alt.max_len() <= hi) return true;
  if (alt.max_len(0) > hi) return false;
  uint64_t good = 0, bad = kMaxCount + 1;  // max_len(good) <= hi
  while (bad - good > 1) {
    const uint64_t mid = (good + bad) / 2;
    (alt.max_len(mid) <= hi ? good : bad) = mid;
  }
  alt.apply_cap(good);
  return true;
}

}  // namespace

StringPattern::StringPattern(const std::string& regex) : alternatives_(Parser(regex).run()) {}
StringPattern::~StringPattern() = default;
StringPattern::StringPattern(StringPattern&&) noexcept = default;
StringPattern& StringPattern::operator=(StringPattern&&) noexcept = default;

uint64_t StringPattern::min_length() const {
  uint64_t m = kUnbounded;
  for (const Node& a : alternatives_) m = std::min(m, a.min_len());
  return m;
}

std::optional<uint64_t> StringPattern::max_length() const {
  uint64_t m = 0;
  for (const Node& a : alternatives_) m = std::max(m, a.max_len());
  if (m == kUnbounded) return std::nullopt;
  return m;
}

void StringPattern::limit_length(uint64_t lo, std::optional<uint64_t> hi_opt) {
  const uint64_t hi = hi_opt.value_or(kUnbounded);
  if (hi < lo) malformed("maxLength is below minLength");
  std::vector<Node> kept;
  for (Node& alt : alternatives_) {
    if (alt.min_len() >= lo && alt.max_len() <= hi) {
      kept.push_back(std::move(alt));
      continue;
    }
    Node exact = alt;
    bool empty = false;
    if (limit_exactly(exact, lo, hi, &empty)) {
      if (!empty) kept.push_back(std::move(exact));
      continue;
    }
    if (alt.min_len() > hi) continue;  // no match of this branch is short enough
    if (!raise_to(alt, lo))
      unsupported(fmt::format(
          "minLength {} beside this pattern: its matches can be shorter and no repetition "
          "reaches that length",
          lo));
    if (!cap_to(alt, hi))
      unsupported(
          fmt::format("maxLength {} beside this pattern: its matches can be longer and capping its "
                      "repetitions does not keep them within it",
                      hi));
    if (alt.min_len() > hi) continue;
    kept.push_back(std::move(alt));
  }
  if (kept.empty())
    malformed(fmt::format("no string matches it with a length from {} to {}", lo,
                          hi == kUnbounded ? std::string("unbounded") : std::to_string(hi)));
  alternatives_ = std::move(kept);
}

std::string StringPattern::gbnf(
    const std::function<std::string(const std::string& body)>& define) const {
  Emitter e(define);
  std::string body;
  for (const Node& a : alternatives_) body += (body.empty() ? "" : " | ") + e.atom(a);
  return fmt::format(R"("\"" {} "\"")", alternatives_.size() > 1 ? "( " + body + " )" : body);
}

}  // namespace pith::server
