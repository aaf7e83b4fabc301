// libFuzzer target: validation of OpenAI requests (server/openai_api.h, responses_request.h) as
// a client's JSON body reaches /v1/completions, /v1/chat/completions and /v1/responses, with a
// real vocabulary and real chat templates (Llama 3.1: JSON tool calls; Qwen2.5: Hermes tags).
// The first byte picks the endpoint and template, the rest is the body. A body is accepted or
// refused with InvalidRequest (HTTP 400 naming the field); pith::Error from the tokenizer or the
// template is also a 400. Any other exception would surface as a 500 with a library's wording, so
// it aborts. An accepted request's grammar (response_format, forced tool calls) must compile.
#include <pith/grammar.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "common/error.h"
#include "common/read_file.h"
#include "server/openai_api.h"
#include "server/responses_request.h"
#include "tokenizer/tokenizer.h"

namespace {

using pith::server::ToolCallFormat;

struct Model {
  explicit Model(const std::string& template_file)
      : source(pith::read_file(std::string(PITH_TEST_DATA) + "/templates/" + template_file)),
        tmpl(source),
        format(pith::server::detect_tool_call_format(source)) {}
  std::string source;
  pith::ChatTemplate tmpl;
  ToolCallFormat format;
};

const pith::Tokenizer& tokenizer() {
  static const pith::Tokenizer t =
      pith::Tokenizer::load(std::string(PITH_TEST_DATA) + "/tokenizer/ggml-vocab-llama-bpe.gguf");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Model llama("meta-llama-Llama-3.1-8B-Instruct.jinja");
  static const Model qwen("Qwen-Qwen2.5-7B-Instruct.jinja");
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  auto ordered = nlohmann::ordered_json::parse(data + 1, data + size, nullptr, false);
  if (ordered.is_discarded()) return 0;
  const Model& model = mode & 4 ? qwen : llama;
  bool chat = mode & 1;
  try {
    if (mode & 2) {  // /v1/responses: translated to a chat body first
      auto lookup = [](const std::string&) -> std::optional<nlohmann::ordered_json> {
        return nlohmann::ordered_json::array(
            {{{"type", "message"}, {"role", "user"}, {"content", "earlier"}}});
      };
      ordered = pith::server::translate_responses_request(ordered, lookup).chat_body;
      chat = true;
    }
    const nlohmann::json body = ordered;
    pith::server::CompletionRequest r = pith::server::parse_completion_request(
        body, chat, tokenizer(), model.tmpl, 4096, 42, &ordered, model.format);
    (void)r.inferlet_args();
    if (!r.grammar.empty()) {
      pith::grammar::Grammar g;
      std::string error;
      if (!pith::grammar::Grammar::parse(r.grammar, &g, &error)) {
        std::fprintf(stderr, "accepted request with a grammar that does not compile: %s\n%s\n",
                     error.c_str(), r.grammar.c_str());
        __builtin_trap();
      }
    }
  } catch (const pith::server::InvalidRequest& e) {
    if (std::string(e.what()).empty()) __builtin_trap();  // a refusal says why
  } catch (const pith::server::UnknownResponse&) {
  } catch (const pith::Error&) {  // ChatTemplateException included
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected %s\n", e.what());
    __builtin_trap();
  }
  return 0;
}
