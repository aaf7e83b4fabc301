// The Jinja interpreter: walks a parsed TemplateAst with a set of variables and returns the
// rendered text. It implements Jinja2's runtime semantics for what chat templates use:
// scoping (a `for` body is a fresh scope per iteration, `if` is not a scope, macros see only
// their arguments and the template's top level), the `loop` object, break/continue, macros,
// namespace assignment, and Python operator semantics. One Interpreter per render call; the
// AST is shared and never modified, so concurrent renders of one template are safe.
#pragma once

#include <string>

#include "chat_template/jinja_ast.h"

namespace pith::jinja {

// Renders `ast` with `variables` as the template's context. Throws TemplateException for the
// template's raise_exception(), pith::Error "chat template line N: ..." for runtime errors.
std::string render(const TemplateAst& ast, const Dict& variables);

}  // namespace pith::jinja
