// libFuzzer target: the Jinja chat-template engine (chat_template/) on an arbitrary template,
// rendered with a fixed conversation, as a model's tokenizer_config.json or --chat-template file
// reaches it. Syntax and runtime errors must be pith::Error (ChatTemplateException included);
// rendering is bounded (templates with loops over huge ranges are the interpreter's limits to
// enforce).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json vars = pith::ChatTemplate::variables_for(
      nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Hi <b>there</b>"},
                     {"role": "assistant", "content": "Hello.",
                      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
                     {"role": "tool", "content": "42"}],
        "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
      })"));
  try {
    pith::ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(vars);
  } catch (const pith::Error&) {  // ChatTemplateException (raise_exception) is one too
  }
  return 0;
}
