// The Jinja lexer (see jinja_lexer.h). Mirrors jinja2/lexer.py's rules: tag and whitespace
// handling of the root state, and the expression token rules (whitespace, float, integer, name,
// string, operator) inside `{{ }}` and `{% %}`.
#include "chat_template/jinja_lexer.h"

#include <cstdlib>

#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Python's `\s+` full match over a text tail (lstrip_blocks).
bool all_whitespace(std::string_view s) {
  if (s.empty()) return false;
  if (text::is_ascii(s)) {
    for (char c : s)
      if (!is_ws(c) && !(c >= 0x1C && c <= 0x1F)) return false;
    return true;
  }
  for (char32_t c : text::decode(s))
    if (!text::is_space(c)) return false;
  return true;
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_text(std::string_view(src_).substr(pos_));
        line_ += count_newlines(std::string_view(src_).substr(pos_));
        pos_ = src_.size();
        break;
      }
      char kind = src_[start + 1];
      char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')
                      ? src_[start + 2]
                      : 0;
      std::string_view text = std::string_view(src_).substr(pos_, start - pos_);
      int text_lines = count_newlines(text);
      if (sign == '-') {
        text = rstrip(text);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting_) && all_whitespace(text.substr(l_pos)))
          text = text.substr(0, l_pos);
      }
      emit_text(text);
      line_ += text_lines;
      pos_ = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && try_raw()) {
        // raw block emitted as text
      } else {
        lex_tag(kind == '{');
      }
    }
    tokens_.push_back(Token{Token::Kind::Eof, "", line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    fail("chat template line {}: {}", line_, msg);
  }

  size_t find_tag(size_t from) const {
    while (true) {
      size_t p = src_.find('{', from);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      from = p + 1;
    }
  }

  static std::string_view rstrip(std::string_view s) {
    if (text::is_ascii(s)) {
      size_t e = s.size();
      while (e > 0 && (is_ws(s[e - 1]) || (s[e - 1] >= 0x1C && s[e - 1] <= 0x1F))) --e;
      return s.substr(0, e);
    }
    std::string stripped = text::strip(s, nullptr, false, true);
    return s.substr(0, stripped.size());  // strip only removes a suffix
  }

  void emit_text(std::string_view t) {
    if (t.empty()) return;
    tokens_.push_back(Token{Token::Kind::Text, std::string(t), line_});
  }

  // Python's `\s*`: ASCII and Unicode whitespace (NBSP, ideographic space, ...).
  void skip_whitespace() {
    while (pos_ < src_.size()) {
      unsigned char c = static_cast<unsigned char>(src_[pos_]);
      if (c < 0x80) {
        if (!is_ws(static_cast<char>(c)) && !(c >= 0x1C && c <= 0x1F)) return;
        line_ += c == '\n';
        ++pos_;
        continue;
      }
      size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      std::u32string cp = text::decode(std::string_view(src_).substr(pos_, n));
      if (cp.size() != 1 || !text::is_space(cp[0])) return;
      pos_ += n;
    }
  }

  // After a closing `%}`/`#}`: `-` eats all following whitespace; plain trims one newline.
  void after_close(char sign, bool trim_newline) {
    if (sign == '-') {
      skip_whitespace();
    } else if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++line_;
      ++pos_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void lex_comment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) error("missing end of comment tag");
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
    pos_ = end + 2;
    after_close(sign, true);
  }

  // `{% raw %}...{% endraw %}`: pos_ is just after `{%` and its sign.
  bool try_raw() {
    size_t p = pos_;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3])))
      return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    line_ += count_newlines(std::string_view(src_).substr(pos_, p - pos_));
    // Find `{%[-+]?\s*endraw\s*[-+]?%}`.
    size_t search = p;
    while (true) {
      size_t q = src_.find("{%", search);
      if (q == std::string::npos) error("missing end of raw directive");
      size_t r = q + 2;
      char sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) sign = src_[r++];
      while (r < src_.size() && is_ws(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) {
        search = q + 2;
        continue;
      }
      r += 6;
      while (r < src_.size() && is_ws(src_[r])) ++r;
      char end_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) {
        search = q + 2;
        continue;
      }
      std::string_view body = std::string_view(src_).substr(p, q - p);
      if (sign == '-') {
        body = rstrip(body);
      } else if (sign != '+') {
        size_t l_pos = body.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if (l_pos > 0 && all_whitespace(body.substr(l_pos))) body = body.substr(0, l_pos);
      }
      emit_text(body);
      line_ += count_newlines(std::string_view(src_).substr(p, r + 2 - p));
      pos_ = r + 2;
      after_close(end_sign, true);
      return true;
    }
  }

  void lex_tag(bool variable) {
    tokens_.push_back(Token{variable ? Token::Kind::VarBegin : Token::Kind::BlockBegin, "", line_});
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size())
        error(variable ? "unexpected end of template, expected '}}'"
                       : "unexpected end of template, expected '%}'");
      if (balance.empty() && try_close(variable)) return;
      char c = src_[pos_];
      if (is_ws(c)) {
        line_ += c == '\n';
        ++pos_;
        continue;
      }
      if (is_digit(c) && (pos_ == 0 || src_[pos_ - 1] != '.') && lex_float()) continue;
      if (is_digit(c)) {
        lex_int();
        continue;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        tokens_.push_back(Token{Token::Kind::Name, src_.substr(pos_, e - pos_), line_});
        pos_ = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      lex_operator(balance);
    }
  }

  bool try_close(bool variable) {
    const char* close = variable ? "}}" : "%}";
    char sign = 0;
    if (src_.compare(pos_, 2, close) == 0) {
      pos_ += 2;
    } else if ((src_[pos_] == '-' || (!variable && src_[pos_] == '+')) &&
               src_.compare(pos_ + 1, 2, close) == 0) {
      sign = src_[pos_];
      pos_ += 3;
    } else {
      return false;
    }
    tokens_.push_back(Token{variable ? Token::Kind::VarEnd : Token::Kind::BlockEnd, "", line_});
    after_close(sign, !variable);
    return true;
  }

  static std::string digits_without_underscores(std::string_view s) {
    std::string out;
    for (char c : s)
      if (c != '_') out.push_back(c);
    return out;
  }

  size_t scan_digits(size_t p) const {  // (\d+_)*\d+
    size_t e = p;
    while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() &&
                                                     is_digit(src_[e + 1]) && e > p)))
      ++e;
    return e;
  }

  bool lex_float() {
    size_t e = scan_digits(pos_);
    size_t frac_end = e;
    if (frac_end < src_.size() && src_[frac_end] == '.' && frac_end + 1 < src_.size() &&
        is_digit(src_[frac_end + 1]))
      frac_end = scan_digits(frac_end + 1);
    size_t end = frac_end;
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t q = end + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) end = scan_digits(q);
    }
    if (end == e) return false;  // neither fraction nor exponent: an integer
    std::string num = digits_without_underscores(std::string_view(src_).substr(pos_, end - pos_));
    Token t{Token::Kind::Float, num, line_};
    t.float_value = std::strtod(num.c_str(), nullptr);
    tokens_.push_back(t);
    pos_ = end;
    return true;
  }

  void lex_int() {
    int base = 10;
    size_t p = pos_;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      char x = static_cast<char>(src_[p + 1] | 0x20);
      if (x == 'x') base = 16;
      if (x == 'o') base = 8;
      if (x == 'b') base = 2;
      if (base != 10) p += 2;
    }
    size_t e = p;
    auto ok = [&](char c) {
      if (c == '_') return true;
      if (base == 16) return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      return c >= '0' && c < '0' + std::min(base, 10);
    };
    while (e < src_.size() && ok(src_[e])) ++e;
    std::string num = digits_without_underscores(std::string_view(src_).substr(p, e - p));
    if (num.empty()) error("invalid integer literal");
    errno = 0;
    Token t{Token::Kind::Int, src_.substr(pos_, e - pos_), line_};
    t.int_value = std::strtoll(num.c_str(), nullptr, base);
    if (errno == ERANGE) error("integer literal out of range: " + t.text);
    tokens_.push_back(t);
    pos_ = e;
  }

  void lex_string(char quote) {
    std::string out;
    size_t p = pos_ + 1;
    int start_line = line_;
    auto hex = [&](size_t at, int n) -> long {
      if (at + n > src_.size()) error("truncated escape in string literal");
      std::string h = src_.substr(at, n);
      for (char c : h)
        if (!std::isxdigit(static_cast<unsigned char>(c))) error("bad escape in string literal");
      return std::strtol(h.c_str(), nullptr, 16);
    };
    while (true) {
      if (p >= src_.size()) {
        line_ = start_line;
        error("unterminated string literal");
      }
      char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) error("unterminated string literal");
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '\n':
          ++line_;
          break;  // line continuation
        case 'x':
          text::append_utf8(out, static_cast<char32_t>(hex(p, 2)));
          p += 2;
          break;
        case 'u':
          text::append_utf8(out, static_cast<char32_t>(hex(p, 4)));
          p += 4;
          break;
        case 'U':
          text::append_utf8(out, static_cast<char32_t>(hex(p, 8)));
          p += 8;
          break;
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k)
              v = v * 8 + (src_[p++] - '0');
            text::append_utf8(out, static_cast<char32_t>(v));
          } else {
            out.push_back('\\');
            out.push_back(e);
            if (e == '\n') ++line_;
          }
      }
    }
    tokens_.push_back(Token{Token::Kind::String, std::move(out), start_line});
    pos_ = p + 1;
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           "<",  ">",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOps) {
      size_t n = std::char_traits<char>::length(op);
      if (src_.compare(pos_, n, op) != 0) continue;
      char c = op[0];
      if (n == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) error(std::string("unexpected '") + c + "'");
        if (balance.back() != c)
          error(std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      tokens_.push_back(Token{Token::Kind::Op, op, line_});
      pos_ += n;
      return;
    }
    error(std::string("unexpected character '") + src_[pos_] + "'");
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

// Jinja2 splits on \r\n, \r and \n, joins with \n and drops one trailing newline.
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace pith::jinja
