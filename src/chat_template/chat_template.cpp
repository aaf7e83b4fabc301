// pith::ChatTemplate (see chat_template.h): glue between JSON requests and the Jinja
// interpreter (jinja_lexer -> jinja_parser -> jinja_interpreter).
#include "chat_template/chat_template.h"

#include "chat_template/jinja_ast.h"
#include "chat_template/jinja_interpreter.h"
#include "chat_template/jinja_parser.h"
#include "common/error.h"

namespace pith {

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)),
      ast_(std::make_unique<jinja::TemplateAst>(jinja::parse(source_))) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

namespace {

template <typename Json>
jinja::Dict to_variables(const Json& variables) {
  if (!variables.is_object()) fail("chat template: variables must be a JSON object");
  jinja::Dict d;
  for (auto it = variables.begin(); it != variables.end(); ++it)
    d.set(it.key(), jinja::Value::from_json(it.value()));
  return d;
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& variables) const {
  return jinja::render(*ast_, to_variables(variables));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  return jinja::render(*ast_, to_variables(variables));
}

nlohmann::ordered_json ChatTemplate::variables_for(const nlohmann::ordered_json& request) {
  if (!request.is_object()) fail("chat template request must be a JSON object");
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  auto get = [&](const char* key) -> const nlohmann::ordered_json* {
    auto it = request.find(key);
    return it == request.end() ? nullptr : &*it;
  };
  const auto* messages = get("messages");
  if (messages && !messages->is_null() && !messages->is_array())
    fail("chat template request: 'messages' must be an array");
  vars["messages"] = messages && !messages->is_null() ? *messages : nlohmann::ordered_json::array();
  vars["tools"] = get("tools") ? *get("tools") : nlohmann::ordered_json();
  vars["documents"] = get("documents") ? *get("documents") : nlohmann::ordered_json();
  const auto* agp = get("add_generation_prompt");
  if (agp && !agp->is_null() && !agp->is_boolean())
    fail("chat template request: 'add_generation_prompt' must be a boolean");
  vars["add_generation_prompt"] = agp && agp->is_boolean() ? agp->get<bool>() : false;
  for (const char* token : {"bos_token", "eos_token"}) {
    const auto* t = get(token);
    if (t && !t->is_null()) vars[token] = *t;
  }
  if (const auto* extra = get("extra_context"); extra && !extra->is_null()) {
    if (!extra->is_object()) fail("chat template request: 'extra_context' must be an object");
    for (auto it = extra->begin(); it != extra->end(); ++it) vars[it.key()] = it.value();
  }
  return vars;
}

}  // namespace pith
