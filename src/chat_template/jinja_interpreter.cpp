// The Jinja interpreter (see jinja_interpreter.h).
#include "chat_template/jinja_interpreter.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_map>

#include "chat_template/jinja_builtins.h"
#include "chat_template/jinja_exception.h"
#include "chat_template/jinja_text.h"
#include "common/error.h"

namespace pith::jinja {

namespace {

// Python's type name, for operator error messages.
std::string py_type(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::None:
      return "NoneType";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "str";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Namespace:
      return "Namespace";
    case Value::Kind::Callable:
      return "function";
  }
  return "object";
}

[[noreturn]] void raise_undefined(const Value& v) {
  fail("{}", v.undefined_hint().empty() ? std::string("undefined value") : v.undefined_hint());
}

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "+" && a.is_string()) fail("can only concatenate str (not \"{}\") to str", py_type(b));
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, py_type(a), py_type(b));
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (n > 0 && seq.as_string().size() > (64u << 20) / static_cast<uint64_t>(n))
      fail("string repetition too large");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  if (n > 0 && seq.as_list().size() > (1u << 20) / static_cast<uint64_t>(n))
    fail("list repetition too large");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      if (a.is_tuple() != b.is_tuple())
        fail("can only concatenate {} (not \"{}\") to {}", a.is_tuple() ? "tuple" : "list",
             b.is_tuple() ? "tuple" : "list", a.is_tuple() ? "tuple" : "list");
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
    }
    bad_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_double() - b.as_double());
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    bad_operands(op, a, b);
  }
  if (!nums) {
    if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b));
    bad_operands(op, a, b);
  }
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    double x = a.as_double(), y = b.as_double();
    if (y == 0) fail("float division by zero");
    double q = std::floor(x / y);
    return op == "//" ? Value(q) : Value(x - q * y);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {  // exponentiation by squaring
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) fail("integer overflow");
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
      }
      return Value(r);
    }
    double r = std::pow(a.as_double(), b.as_double());
    if (std::isinf(r) && std::isfinite(a.as_double()) && std::isfinite(b.as_double())) {
      if (a.as_double() == 0) fail("0.0 cannot be raised to a negative power");
      fail("(34, 'Numerical result out of range')");
    }
    return Value(r);
  }
  fail("unknown operator '{}'", op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not {}", py_type(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const auto& v : container.as_list())
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::Dict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case Value::Kind::Undefined:
      return false;
    default:
      fail("argument of type '{}' is not iterable", py_type(container));
  }
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "<") return values_less(a, b);
  if (op == ">") return values_less(b, a);
  if (op == "<=") return !values_less(b, a);
  if (op == ">=") return !values_less(a, b);
  fail("unknown comparison '{}'", op);
}

// Python slice semantics on a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v,
                                  const Value& step_v) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail("slice {} must be an integer or None", what);
    return v.as_int();
  };
  int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t start = clamp(as_index(start_v, "start"), step > 0 ? 0 : n - 1);
  int64_t stop = clamp(as_index(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    out.push_back(static_cast<size_t>(i));
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return out;
}

enum class Flow { Normal, Break, Continue };

constexpr int kMaxMacroDepth = 100;  // Python would raise RecursionError; we must not overflow

using Frame = std::unordered_map<std::string, Value>;

class Interpreter {
 public:
  Interpreter(const Dict& variables, std::string& out) : out_(&out) {
    frames_.emplace_back();
    for (const auto& [k, v] : variables.entries()) frames_[0][k] = v;
  }

  void run(const Body& body) {
    try {
      exec_body(body);
    } catch (const TemplateException&) {
      throw;
    } catch (const Error& e) {
      throw Error(fmt::format("chat template line {}: {}", line_, e.what()));
    }
  }

 private:
  // ---- variables ----

  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > floor_;) {
      auto it = frames_[i].find(name);
      if (it != frames_[i].end()) return it->second;
    }
    if (floor_ > 0) {
      auto it = frames_[0].find(name);
      if (it != frames_[0].end()) return it->second;
    }
    if (auto g = get_global(name)) return *g;
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  void assign(const Target& t, const Value& v) {
    Frame& frame = frames_.back();
    if (!t.attr.empty()) {
      Value ns = lookup(t.names[0]);
      if (!ns.is_namespace()) fail("cannot assign attribute on non-namespace object");
      ns.namespace_attrs().set(t.attr, v);
      return;
    }
    if (t.names.size() == 1) {
      frame[t.names[0]] = v;
      return;
    }
    List items = iterate(v);
    if (items.size() != t.names.size())
      fail("cannot unpack {} values into {} variables", items.size(), t.names.size());
    for (size_t i = 0; i < items.size(); ++i) frame[t.names[i]] = items[i];
  }

  // ---- statements ----

  Flow exec_body(const Body& body) {
    for (const auto& s : body) {
      Flow f = exec(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  std::string capture(const Body& body) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    try {
      exec_body(body);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  Flow exec(const Stmt& s) {
    line_ = s.line;
    switch (s.kind) {
      case Stmt::Kind::Text:
        out_->append(s.text);
        return Flow::Normal;
      case Stmt::Kind::Output: {
        Value v = eval(*s.expr);
        if (v.is_string())
          out_->append(v.as_string());
        else
          out_->append(v.str());
        return Flow::Normal;
      }
      case Stmt::Kind::If:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          if (eval(*s.conds[i]).truthy()) return exec_body(s.bodies[i]);
          line_ = s.line;
        }
        return exec_body(s.else_body);
      case Stmt::Kind::For:
        return exec_for(s);
      case Stmt::Kind::Set:
        assign(s.target, eval(*s.expr));
        return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        Value v(capture(s.bodies[0]));
        if (s.expr) v = eval_filter_chain(*s.expr, v);
        assign(s.target, v);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro:
        frames_.back()[s.text] = make_macro(s);
        return Flow::Normal;
      case Stmt::Kind::Break:
        return Flow::Break;
      case Stmt::Kind::Continue:
        return Flow::Continue;
      case Stmt::Kind::FilterBlock: {
        Value v(capture(s.bodies[0]));
        Value r = eval_filter_chain(*s.expr, v);
        out_->append(r.str());
        return Flow::Normal;
      }
      case Stmt::Kind::Generation:
        return exec_body(s.bodies[0]);
      case Stmt::Kind::With: {
        Frame frame;
        for (const auto& p : s.params) frame[p.name] = eval(*p.default_value);
        frames_.push_back(std::move(frame));
        Flow f = exec_body(s.bodies[0]);
        frames_.pop_back();
        return f;
      }
    }
    return Flow::Normal;
  }

  Flow exec_for(const Stmt& s) {
    Value iterable = eval(*s.expr);
    if (iterable.is_none() || iterable.is_number() || iterable.is_callable() ||
        iterable.is_namespace())
      fail("'{}' object is not iterable", py_type(iterable));
    List items = iterate(iterable);
    if (s.filter) {
      List kept;
      frames_.emplace_back();
      for (auto& item : items) {
        frames_.back().clear();
        assign(s.target, item);
        if (eval(*s.filter).truthy()) kept.push_back(item);
      }
      frames_.pop_back();
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.else_body);
    const auto n = static_cast<int64_t>(items.size());
    frames_.emplace_back();
    for (int64_t i = 0; i < n; ++i) {
      frames_.back().clear();
      assign(s.target, items[i]);
      frames_.back()["loop"] = make_loop(items, i);
      Flow f;
      try {
        f = exec_body(s.bodies[0]);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      if (f == Flow::Break) break;
    }
    frames_.pop_back();
    return Flow::Normal;
  }

  static Value make_loop(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Dict loop;
    loop.set("index0", Value(i));
    loop.set("index", Value(i + 1));
    loop.set("revindex0", Value(n - i - 1));
    loop.set("revindex", Value(n - i));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == n - 1));
    loop.set("length", Value(n));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::callable("loop.cycle", [i](CallArgs& a) -> Value {
               if (a.positional.empty()) fail("no items for cycling given");
               return a.positional[static_cast<size_t>(i) % a.positional.size()];
             }));
    return Value(std::move(loop));
  }

  Value make_macro(const Stmt& s) {
    return Value::callable(s.text, [this, &s](CallArgs& args) -> Value {
      if (args.positional.size() > s.params.size())
        fail("macro '{}' takes not more than {} argument(s)", s.text, s.params.size());
      Frame frame;
      std::vector<bool> given(s.params.size(), false);
      for (size_t i = 0; i < args.positional.size(); ++i) {
        frame[s.params[i].name] = args.positional[i];
        given[i] = true;
      }
      for (auto& [k, v] : args.keyword) {
        size_t i = 0;
        while (i < s.params.size() && s.params[i].name != k) ++i;
        if (i == s.params.size()) fail("macro '{}' has no parameter '{}'", s.text, k);
        if (given[i]) fail("macro '{}' got multiple values for parameter '{}'", s.text, k);
        frame[k] = v;
        given[i] = true;
      }
      if (macro_depth_ >= kMaxMacroDepth)
        fail("macro '{}': recursion deeper than {} calls", s.text, kMaxMacroDepth);
      ++macro_depth_;
      size_t saved_floor = floor_;
      int saved_line = line_;
      frames_.push_back(std::move(frame));
      floor_ = frames_.size() - 1;
      std::string result;
      try {
        for (size_t i = 0; i < s.params.size(); ++i) {
          if (given[i]) continue;
          frames_.back()[s.params[i].name] =
              s.params[i].default_value
                  ? eval(*s.params[i].default_value)
                  : Value::undefined(fmt::format("'{}' is undefined", s.params[i].name));
        }
        result = capture(s.bodies[0]);
      } catch (...) {
        frames_.pop_back();
        floor_ = saved_floor;
        --macro_depth_;
        throw;
      }
      frames_.pop_back();
      floor_ = saved_floor;
      --macro_depth_;
      line_ = saved_line;
      return Value(std::move(result));
    });
  }

  // ---- expressions ----

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v));
    return a;
  }

  Value eval_filter_chain(const Expr& e, const Value& input) {
    Value in = e.args[0] ? eval_filter_chain(*e.args[0], input) : input;
    CallArgs a = eval_args(e, 1);
    line_ = e.line;
    return apply_filter(e.name, in, a);
  }

  Value eval(const Expr& e) {
    line_ = e.line;
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name);
      case Expr::Kind::ListLit:
      case Expr::Kind::TupleLit: {
        List l;
        l.reserve(e.args.size());
        for (const auto& a : e.args) l.push_back(eval(*a));
        return e.kind == Expr::Kind::TupleLit ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case Expr::Kind::DictLit: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (!k.is_string()) fail("dict keys must be strings, got {}", py_type(k));
          d.set(k.as_string(), eval(*e.args[i + 1]));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::GetAttr: {
        Value obj = eval(*e.args[0]);
        line_ = e.line;
        return get_attr(obj, e.name);
      }
      case Expr::Kind::GetItem: {
        Value obj = eval(*e.args[0]);
        Value key = eval(*e.args[1]);
        line_ = e.line;
        return get_item(obj, key);
      }
      case Expr::Kind::Slice: {
        Value obj = eval(*e.args[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k)
          if (e.args[k + 1]) parts[k] = eval(*e.args[k + 1]);
        line_ = e.line;
        if (obj.is_undefined()) raise_undefined(obj);
        if (obj.is_list()) {
          const List& l = obj.as_list();
          List out;
          for (size_t i :
               slice_indices(static_cast<int64_t>(l.size()), parts[0], parts[1], parts[2]))
            out.push_back(l[i]);
          return obj.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
        }
        if (obj.is_string()) {
          const std::string& s = obj.as_string();
          if (text::is_ascii(s)) {
            std::string out;
            for (size_t i :
                 slice_indices(static_cast<int64_t>(s.size()), parts[0], parts[1], parts[2]))
              out.push_back(s[i]);
            return Value(std::move(out));
          }
          std::u32string u = text::decode(s), out;
          for (size_t i :
               slice_indices(static_cast<int64_t>(u.size()), parts[0], parts[1], parts[2]))
            out.push_back(u[i]);
          return Value(text::encode(out));
        }
        if (obj.is_dict()) fail("unhashable type: 'slice'");
        fail("'{}' object is not subscriptable", py_type(obj));
      }
      case Expr::Kind::Call: {
        Value callee = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        line_ = e.line;
        if (callee.is_undefined()) raise_undefined(callee);
        if (!callee.is_callable()) fail("'{}' object is not callable", py_type(callee));
        return callee.as_callable().fn(a);
      }
      case Expr::Kind::Filter: {
        Value in = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        line_ = e.line;
        return apply_filter(e.name, in, a);
      }
      case Expr::Kind::Test: {
        Value in = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        line_ = e.line;
        return Value(apply_test(e.name, in, a) != e.negated);
      }
      case Expr::Kind::Not:
        return Value(!eval(*e.args[0]).truthy());
      case Expr::Kind::Neg:
      case Expr::Kind::Pos: {
        Value v = eval(*e.args[0]);
        line_ = e.line;
        if (v.is_undefined()) raise_undefined(v);
        if (!v.is_number())
          fail("bad operand type for unary {}: '{}'", e.kind == Expr::Kind::Neg ? "-" : "+",
               py_type(v));
        if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value(v.as_int()) : v;
        if (v.is_float()) return Value(-v.as_double());
        if (v.as_int() == INT64_MIN) fail("integer overflow");
        return Value(-v.as_int());
      }
      case Expr::Kind::Binary: {
        Value a = eval(*e.args[0]);
        Value b = eval(*e.args[1]);
        line_ = e.line;
        return arithmetic(e.name, a, b);
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          line_ = e.line;
          if (!compare(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::And: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? eval(*e.args[1]) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? a : eval(*e.args[1]);
      }
      case Expr::Kind::Cond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined(
            "the inline if-expression evaluated to false and no else section was defined");
    }
    fail("unknown expression");
  }

  std::string* out_;
  std::vector<Frame> frames_;
  size_t floor_ = 0;  // frames below this (except frame 0) are hidden: a macro is running
  int line_ = 0;
  int macro_depth_ = 0;
};

}  // namespace

std::string render(const TemplateAst& ast, const Dict& variables) {
  std::string out;
  Interpreter(variables, out).run(ast.body);
  return out;
}

}  // namespace pith::jinja
