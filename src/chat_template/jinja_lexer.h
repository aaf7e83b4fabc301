// The Jinja lexer: splits template source into text and tag tokens, applying whitespace
// control exactly as Jinja2 does under Hugging Face's settings (trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False): `{%-`/`-%}` strip all adjacent whitespace,
// `{%+`/`+%}` opt out, a block or comment tag alone on its line loses its indentation and the
// newline after it. Expression tokens carry their line for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pith::jinja {

struct Token {
  enum class Kind {
    Text,        // literal template text, already whitespace-controlled
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,  // text holds the unescaped value
    Int,
    Float,
    Op,  // text holds the operator: + - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | ,
    Eof,
  };
  Kind kind;
  std::string text;
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws pith::Error "chat template line N: ..." on malformed input (unterminated tags or
// strings, unknown characters, unbalanced brackets).
std::vector<Token> lex(std::string_view source);

}  // namespace pith::jinja
