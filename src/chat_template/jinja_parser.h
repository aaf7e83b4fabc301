// The Jinja parser: turns lexer tokens into a TemplateAst, following Jinja2's grammar and
// operator precedence (jinja2/parser.py). Unsupported statements, filters and tests are
// rejected here, at parse time, with a pith::Error naming the construct and its line, so a
// model whose template pith cannot render fails when it is loaded, not on its first request.
#pragma once

#include <string_view>

#include "chat_template/jinja_ast.h"

namespace pith::jinja {

TemplateAst parse(std::string_view source);

}  // namespace pith::jinja
