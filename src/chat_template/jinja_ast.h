// The Jinja syntax tree: what the parser builds once per template and the interpreter walks on
// every render. Expressions and statements are plain tagged structs (one struct per family,
// fields used according to `kind`) owned through unique_ptr; every node keeps its source line
// for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/jinja_value.h"

namespace pith::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    ListLit,   // args: items
    TupleLit,  // args: items
    DictLit,   // args: key0, value0, key1, value1, ...
    GetAttr,   // args[0].name
    GetItem,   // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts omitted)
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs)
    Test,      // args[0] is [not] name(args[1..], kwargs); negated
    Not,       // not args[0]
    Neg,       // -args[0]
    Pos,       // +args[0]
    Binary,    // args[0] op args[1]: + - * / // % ** ~
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (chained)
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    Cond,      // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value value;                // Literal
  std::string name;           // Name, GetAttr attribute, Filter/Test name, Binary operator
  std::vector<ExprPtr> args;  // operands; null entries for omitted slice parts / else branch
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare operators: == != < <= > >= in notin
  bool negated = false;          // Test with `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: a name, `ns.attr`, or a tuple of names (`for k, v in ...`).
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  std::string attr;                // non-empty: assign names[0].attr (namespace attribute)
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // conds[i] -> bodies[i]; else_body
    For,       // for target in expr [if filter]: bodies[0]; else_body
    Set,       // set target = expr
    SetBlock,  // set target %}bodies[0]{% endset (filtered through filters, if any)
    Macro,     // macro name(params): bodies[0]
    Break,
    Continue,
    FilterBlock,  // filter: expr is a Filter node whose input (args[0]) is null; bodies[0]
    Generation,   // {% generation %} bodies[0] (Hugging Face's assistant-mask extension)
    With,         // with params[i].name = params[i].default_value, ...: bodies[0] in a new scope
  };
  Kind kind;
  int line = 0;
  std::string text;  // Text, Macro name
  ExprPtr expr;      // Output, For iterable, Set value, FilterBlock filter chain
  ExprPtr filter;    // For loop filter (`for x in xs if cond`)
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body else_body;
  Target target;
  std::vector<MacroParam> params;  // Macro parameters; With assignments
};

// A parsed template: parse once, render many times.
struct TemplateAst {
  Body body;
};

}  // namespace pith::jinja
