#include "server/tokenize_api.h"

#include <fmt/format.h>

#include "server/openai_api.h"

namespace pith::server {

using nlohmann::json;

namespace {

void only_fields(const json& body, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* a : allowed) known |= key == a;
    if (!known) refuse_request(key, "unrecognized request argument '{}'", key);
  }
}

}  // namespace

json tokenize_response(const json& body, const Tokenizer& tok, const ChatTemplate& chat_template,
                       uint32_t context_length) {
  if (!body.is_object()) refuse_request("", "the request body must be a JSON object");
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    only_fields(body, {"model", "messages", "tools", "add_generation_prompt", "add_special_tokens",
                       "return_token_strs"});
    if (bool_field(body, "add_special_tokens").value_or(false))
      refuse_request("add_special_tokens", "the chat template places the special tokens itself");
    const nlohmann::ordered_json tools =
        body.contains("tools") ? nlohmann::ordered_json(body["tools"]) : nlohmann::ordered_json();
    ids = chat_prompt_tokens(body["messages"], tok, chat_template,
                             bool_field(body, "add_generation_prompt").value_or(true), &tools);
  } else {
    only_fields(body, {"model", "prompt", "add_special_tokens", "return_token_strs"});
    auto it = body.find("prompt");
    if (it == body.end() || !it->is_string())
      refuse_request("prompt", "'prompt' (a string) or 'messages' is required");
    ids = tok.encode(it->get<std::string>(), bool_field(body, "add_special_tokens").value_or(true),
                     /*parse_special=*/false);
  }
  json out = {{"count", ids.size()}, {"max_model_len", context_length}, {"tokens", ids}};
  if (bool_field(body, "return_token_strs").value_or(false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(tok.token_bytes(id));
    out["token_strs"] = std::move(strs);
  }
  return out;
}

json detokenize_response(const json& body, const Tokenizer& tok) {
  if (!body.is_object()) refuse_request("", "the request body must be a JSON object");
  only_fields(body, {"model", "tokens"});
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array())
    refuse_request("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) refuse_request("tokens", "'tokens' must hold integer token ids");
    int64_t id = v.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
      refuse_request("tokens", "token {} is outside the vocabulary of {} tokens", id,
                     tok.vocab_size());
    ids.push_back(static_cast<int32_t>(id));
  }
  return {{"prompt", tok.decode(ids)}};
}

}  // namespace pith::server
