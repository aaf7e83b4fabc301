// pith::ChatTemplate: a model's own Jinja chat template (GGUF `tokenizer.chat_template` or
// tokenizer_config.json `chat_template`), parsed once and rendered per request the way
// Hugging Face's apply_chat_template renders it (Jinja2 with trim_blocks and lstrip_blocks,
// tojson without ASCII escaping, raise_exception and strftime_now globals), byte for byte.
//
// Parsing rejects templates that use constructs pith does not implement, naming the construct
// and its line. Rendering is a tree walk over the parsed AST; a ChatTemplate is immutable after
// construction, so one instance can serve concurrent requests.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "chat_template/jinja_exception.h"

namespace pith {

namespace jinja {
struct TemplateAst;
}

// Thrown when the template itself calls raise_exception(msg); what() is exactly msg.
using ChatTemplateException = jinja::TemplateException;

class ChatTemplate {
 public:
  // Throws pith::Error "chat template line N: ..." for syntax errors and unsupported constructs.
  explicit ChatTemplate(std::string source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with `variables` (a JSON object) as the template context: `messages`,
  // `add_generation_prompt`, `bos_token`, ... Object key order is kept for tojson when an
  // ordered_json is passed. Throws ChatTemplateException (template's raise_exception) or
  // pith::Error (runtime error such as an undefined attribute access, with its line).
  std::string render(const nlohmann::json& variables) const;
  std::string render(const nlohmann::ordered_json& variables) const;

  // The variables Hugging Face's apply_chat_template passes for a request:
  // messages, tools and documents (null when absent: HF passes tools=None, documents=None),
  // add_generation_prompt (default false), bos_token/eos_token only when present and not null,
  // then every entry of `extra_context`. `request` has those keys; unknown keys are ignored.
  static nlohmann::ordered_json variables_for(const nlohmann::ordered_json& request);

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::unique_ptr<jinja::TemplateAst> ast_;
};

}  // namespace pith
