// The Jinja parser (see jinja_parser.h). One method per grammar rule, named as in
// jinja2/parser.py so the two can be read side by side.
#include "chat_template/jinja_parser.h"

#include <fmt/format.h>

#include <algorithm>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_lexer.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

using K = Token::Kind;

std::string describe(const Token& t) {
  switch (t.kind) {
    case K::Text:
      return "template text";
    case K::VarBegin:
      return "'{{'";
    case K::VarEnd:
      return "'}}'";
    case K::BlockBegin:
      return "'{%'";
    case K::BlockEnd:
      return "'%}'";
    case K::Name:
      return "'" + t.text + "'";
    case K::String:
      return "string literal";
    case K::Int:
    case K::Float:
      return "number '" + t.text + "'";
    case K::Op:
      return "'" + t.text + "'";
    case K::Eof:
      return "end of template";
  }
  return "token";
}

// Nesting limit for statements and expressions: real templates nest a handful of levels; the
// limit keeps hostile input from overflowing the stack of the (recursive-descent) parser and
// of the tree-walking interpreter.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  TemplateAst run() {
    TemplateAst ast;
    std::string found;
    ast.body = parse_body({}, &found);
    return ast;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  bool at_op(const char* op) const { return cur().kind == K::Op && cur().text == op; }
  bool at_name(const char* name) const { return cur().kind == K::Name && cur().text == name; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }

  [[noreturn]] void error_at(int line, const std::string& msg) const {
    fail("chat template line {}: {}", line, msg);
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    error_at(cur().line, fmt::format("unexpected {}, expected {}", describe(cur()), expected));
  }
  void expect_op(const char* op) {
    if (!at_op(op)) unexpected(fmt::format("'{}'", op));
    next();
  }
  void expect_block_end() {
    if (cur().kind != K::BlockEnd) unexpected("'%}'");
    next();
  }
  std::string expect_name(const char* what) {
    if (cur().kind != K::Name) unexpected(what);
    return next().text;
  }

  static ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses until a `{% tag` whose tag is in `end_tags` (consumed up to and including the tag
  // name; the caller parses the rest of that tag).
  Body parse_body(const std::vector<std::string>& end_tags, std::string* found) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == K::Eof) {
        if (end_tags.empty()) return body;
        std::string tags;
        for (const auto& s : end_tags) tags += (tags.empty() ? "'" : " or '") + s + "'";
        error_at(t.line, "unexpected end of template, expected " + tags);
      }
      if (t.kind == K::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == K::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = t.line;
        s->expr = parse_tuple(true);
        if (cur().kind != K::VarEnd) unexpected("'}}'");
        next();
        body.push_back(std::move(s));
      } else if (t.kind == K::BlockBegin) {
        next();
        if (cur().kind != K::Name) unexpected("a tag name");
        const std::string& tag = cur().text;
        if (std::find(end_tags.begin(), end_tags.end(), tag) != end_tags.end()) {
          *found = tag;
          next();
          return body;
        }
        body.push_back(parse_statement());
      } else {
        unexpected("template text or a tag");
      }
    }
  }

  StmtPtr parse_statement() {
    Nest nest(*this);
    const Token& t = next();
    auto s = std::make_unique<Stmt>();
    s->line = t.line;
    const std::string& tag = t.text;
    std::string found;
    if (tag == "if") {
      s->kind = Stmt::Kind::If;
      while (true) {
        s->conds.push_back(parse_tuple(true));
        expect_block_end();
        s->bodies.push_back(parse_body({"elif", "else", "endif"}, &found));
        if (found == "elif") continue;
        if (found == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, &found);
        }
        expect_block_end();
        break;
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::For;
      s->target = parse_assign_target(false);
      if (!at_name("in")) unexpected("'in'");
      next();
      s->expr = parse_tuple(false);
      if (at_name("if")) {
        next();
        s->filter = parse_tuple(true);
      }
      if (at_name("recursive")) error_at(cur().line, "unsupported construct: recursive for loop");
      expect_block_end();
      ++loop_depth_;
      s->bodies.push_back(parse_body({"endfor", "else"}, &found));
      --loop_depth_;
      if (found == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &found);
      }
      expect_block_end();
    } else if (tag == "set") {
      s->target = parse_assign_target(true);
      if (at_op("=")) {
        next();
        s->kind = Stmt::Kind::Set;
        s->expr = parse_tuple(true);
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::SetBlock;
        if (!s->target.attr.empty() || s->target.names.size() != 1)
          error_at(s->line, "a block set needs a single variable name");
        if (at_op("|")) s->expr = parse_filter_chain();
        expect_block_end();
        s->bodies.push_back(parse_body({"endset"}, &found));
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::Macro;
      s->text = expect_name("a macro name");
      expect_op("(");
      while (!at_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (at_op(")")) break;
        MacroParam p;
        p.name = expect_name("a parameter name");
        if (at_op("=")) {
          next();
          p.default_value = parse_expression(true);
        } else if (!s->params.empty() && s->params.back().default_value) {
          error_at(cur().line, "non-default macro parameter follows a default one");
        }
        s->params.push_back(std::move(p));
      }
      next();
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->bodies.push_back(parse_body({"endmacro"}, &found));
      loop_depth_ = saved;
      if (cur().kind == K::Name) next();  // {% endmacro name %}
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error_at(s->line, fmt::format("'{}' outside of a loop", tag));
      s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_block_end();
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->expr = parse_filter_chain_names();
      expect_block_end();
      s->bodies.push_back(parse_body({"endfilter"}, &found));
      expect_block_end();
    } else if (tag == "with") {
      s->kind = Stmt::Kind::With;
      while (cur().kind != K::BlockEnd) {
        if (!s->params.empty()) expect_op(",");
        MacroParam p;
        p.name = expect_name("a variable name");
        expect_op("=");
        p.default_value = parse_expression(true);
        s->params.push_back(std::move(p));
      }
      expect_block_end();
      s->bodies.push_back(parse_body({"endwith"}, &found));
      expect_block_end();
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::Generation;
      expect_block_end();
      s->bodies.push_back(parse_body({"endgeneration"}, &found));
      expect_block_end();
    } else if (tag == "elif" || tag == "else" || tag.rfind("end", 0) == 0) {
      error_at(t.line, fmt::format("unexpected tag '{}'", tag));
    } else {
      error_at(t.line, fmt::format("unsupported tag '{}'", tag));
    }
    return s;
  }

  Target parse_assign_target(bool allow_attr) {
    Target target;
    bool parens = at_op("(");
    if (parens) next();
    target.names.push_back(expect_name("a variable name"));
    if (allow_attr && !parens && at_op(".")) {
      next();
      target.attr = expect_name("an attribute name");
      return target;
    }
    while (at_op(",")) {
      next();
      if (cur().kind != K::Name) break;
      target.names.push_back(next().text);
    }
    if (parens) expect_op(")");
    return target;
  }

  // `| f1(args) | f2` after `{% set x`: a Filter chain whose innermost input is null.
  ExprPtr parse_filter_chain() {
    ExprPtr node;
    while (at_op("|")) node = parse_filter(std::move(node));
    return node;
  }
  // `{% filter f1(args) | f2 %}`: the first filter has no leading pipe.
  ExprPtr parse_filter_chain_names() {
    ExprPtr node = parse_filter(nullptr, /*pipe=*/false);
    while (at_op("|")) node = parse_filter(std::move(node));
    return node;
  }

  // ---- expressions ----

  bool at_tuple_end() const {
    return cur().kind == K::VarEnd || cur().kind == K::BlockEnd || at_op(")") ||
           cur().kind == K::Eof;
  }

  ExprPtr parse_tuple(bool with_condexpr) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (!items.empty() && at_tuple_end()) break;
      if (at_tuple_end() || (!with_condexpr && at_name("if"))) {
        if (items.empty()) unexpected("an expression");
        break;
      }
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
      if (at_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) return std::move(items[0]);
    auto e = make(Expr::Kind::TupleLit, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    Nest nest(*this);
    ExprPtr e1 = parse_or();
    while (at_name("if")) {
      int line = cur().line;
      next();
      ExprPtr cond = parse_or();
      ExprPtr e3;
      if (at_name("else")) {
        next();
        e3 = parse_condexpr();
      }
      auto c = make(Expr::Kind::Cond, line);
      c->args.push_back(std::move(e1));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e3));
      e1 = std::move(c);
    }
    return e1;
  }

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      int line = next().line;
      left = binary(Expr::Kind::Or, "or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      int line = next().line;
      left = binary(Expr::Kind::And, "and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    Nest nest(*this);
    if (at_name("not")) {
      int line = next().line;
      auto e = make(Expr::Kind::Not, line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().kind == K::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        ops.push_back(next().text);
      } else if (at_name("in")) {
        next();
        ops.push_back("in");
      } else if (at_name("not") && peek().kind == K::Name && peek().text == "in") {
        next();
        next();
        ops.push_back("notin");
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(Expr::Kind::Compare, line);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      std::string op = t.text;
      left = binary(Expr::Kind::Binary, op, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_op("~")) {
      int line = next().line;
      left = binary(Expr::Kind::Binary, "~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      std::string op = t.text;
      left = binary(Expr::Kind::Binary, op, std::move(left), parse_pow(), t.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_op("**")) {
      int line = next().line;
      left = binary(Expr::Kind::Binary, "**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      const Token& t = next();
      node = make(t.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, t.line);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.kind == K::Name) {
      next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = make(Expr::Kind::Literal, line);
        e->value = Value(t.text[0] == 't' || t.text[0] == 'T');
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = make(Expr::Kind::Literal, line);
        e->value = Value::none();
        return e;
      }
      auto e = make(Expr::Kind::Name, line);
      e->name = t.text;
      return e;
    }
    if (t.kind == K::String) {
      std::string s;
      while (cur().kind == K::String) s += next().text;  // adjacent literals concatenate
      auto e = make(Expr::Kind::Literal, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == K::Int || t.kind == K::Float) {
      auto e = make(Expr::Kind::Literal, line);
      e->value = t.kind == K::Int ? Value(t.int_value) : Value(t.float_value);
      next();
      return e;
    }
    if (at_op("(")) {
      next();
      ExprPtr e;
      if (at_op(")")) {
        e = make(Expr::Kind::TupleLit, line);  // empty tuple
      } else {
        e = parse_tuple(true);
      }
      expect_op(")");
      return e;
    }
    if (at_op("[")) {
      next();
      auto e = make(Expr::Kind::ListLit, line);
      while (!at_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (at_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (at_op("{")) {
      next();
      auto e = make(Expr::Kind::DictLit, line);
      while (!at_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (at_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".") || at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        node = parse_filter(std::move(node));
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    int line = t.line;
    if (t.text == ".") {
      if (cur().kind == K::Name) {
        auto e = make(Expr::Kind::GetAttr, line);
        e->name = next().text;
        e->args.push_back(std::move(node));
        return e;
      }
      if (cur().kind == K::Int) {
        auto e = make(Expr::Kind::GetItem, line);
        e->args.push_back(std::move(node));
        auto idx = make(Expr::Kind::Literal, line);
        idx->value = Value(next().int_value);
        e->args.push_back(std::move(idx));
        return e;
      }
      unexpected("an attribute name");
    }
    // '['
    ExprPtr parts[3];
    bool is_slice = false;
    if (!at_op(":")) parts[0] = parse_expression(true);
    if (at_op(":")) {
      is_slice = true;
      next();
      if (!at_op("]") && !at_op(":")) parts[1] = parse_expression(true);
      if (at_op(":")) {
        next();
        if (!at_op("]")) parts[2] = parse_expression(true);
      }
    }
    if (at_op(",")) error_at(cur().line, "unsupported construct: tuple subscript");
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::Slice : Expr::Kind::GetItem, line);
    e->args.push_back(std::move(node));
    for (int k = 0; k < (is_slice ? 3 : 1); ++k) e->args.push_back(std::move(parts[k]));
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) error_at(cur().line, "unsupported construct: *args/**kwargs");
      if (cur().kind == K::Name && peek().kind == K::Op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error_at(cur().line, "positional argument follows keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(Expr::Kind::Call, cur().line);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr node, bool pipe = true) {
    if (pipe) next();  // '|'
    int line = cur().line;
    std::string name = expect_name("a filter name");
    while (at_op(".") && peek().kind == K::Name) {
      next();
      name += "." + next().text;
    }
    if (!is_known_filter(name)) error_at(line, fmt::format("unsupported filter '{}'", name));
    auto e = make(Expr::Kind::Filter, line);
    e->name = name;
    e->args.push_back(std::move(node));
    if (at_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // 'is'
    bool negated = false;
    if (at_name("not")) {
      next();
      negated = true;
    }
    std::string name = expect_name("a test name");
    if (!is_known_test(name)) error_at(line, fmt::format("unsupported test '{}'", name));
    auto e = make(Expr::Kind::Test, line);
    e->name = name;
    e->negated = negated;
    e->args.push_back(std::move(node));
    if (at_op("(")) {
      parse_call_args(*e);
    } else if ((cur().kind == K::Name || cur().kind == K::String || cur().kind == K::Int ||
                cur().kind == K::Float || at_op("[") || at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      ExprPtr arg = parse_primary();
      e->args.push_back(parse_postfix(std::move(arg)));
    }
    return e;
  }

  // RAII nesting counter.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        p_.error_at(p_.cur().line,
                    fmt::format("template nests deeper than {} levels", kMaxNesting));
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  std::vector<Token> toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int depth_ = 0;
};

}  // namespace

TemplateAst parse(std::string_view source) {
  return Parser(lex(source)).run();
}

}  // namespace pith::jinja
