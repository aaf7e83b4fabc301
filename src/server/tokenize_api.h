// /tokenize and /detokenize in vLLM's shapes, so that clients and routers that count tokens
// against the server (prompt budgeting, cache-aware routing) work unchanged:
//   POST /tokenize   {"prompt": TEXT, "add_special_tokens": true}
//                    {"messages": [...], "add_generation_prompt": true}   (the chat template)
//     -> {"count": N, "max_model_len": L, "tokens": [...], "token_strs": [...] (when
//        "return_token_strs": true)}
//   POST /detokenize {"tokens": [...]} -> {"prompt": TEXT}
// An optional "model" must name the served model (the route answers 404 otherwise).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "tokenizer/tokenizer.h"

namespace pith {
class ChatTemplate;
}

namespace pith::server {

// Both throw InvalidRequest (openai_api.h) naming the field at fault.
nlohmann::json tokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer,
                                 const ChatTemplate& chat_template, uint32_t context_length);
nlohmann::json detokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer);

}  // namespace pith::server
