// A model output replayed through a chat completion session as the built-in inferlet reports
// it (one token message per id, then the end), read back as the client sees it: the whole
// response's message, or the streamed deltas joined.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/completion_session.h"
#include "tokenizer/tokenizer.h"

namespace pith::server {

struct ChatReply {
  nlohmann::json message;           // whole response: choices[0].message
  std::string finish;               // its finish_reason
  std::string streamed, reasoning;  // streamed: content and reasoning deltas, joined
  nlohmann::json tool_calls = nlohmann::json::array();  // streamed tool_calls deltas
};

// `output` is tokenized with special tokens parsed, as the model would emit it.
inline ChatReply replay_chat(const CompletionRequest& r, const Tokenizer& tok,
                             const std::string& output) {
  CompletionSession s(r, tok, "chatcmpl-replay", "model", 1);
  ChatReply reply;
  auto take = [&](const std::vector<nlohmann::json>& chunks) {
    for (const nlohmann::json& c : chunks) {
      if (c["choices"].empty()) continue;
      const nlohmann::json& choice = c["choices"][0];
      const nlohmann::json& d = choice["delta"];
      if (d.contains("content") && d["content"].is_string()) reply.streamed += d["content"];
      reply.reasoning += d.value("reasoning_content", "");
      if (d.contains("tool_calls"))
        for (const nlohmann::json& call : d["tool_calls"]) reply.tool_calls.push_back(call);
      if (choice["finish_reason"].is_string()) reply.finish = choice["finish_reason"];
    }
  };
  const auto ids = tok.encode(output, false, true);
  for (int32_t id : ids) take(s.on_message("tok 0 " + std::to_string(id) + " -0.1"));
  take(s.on_message("end 0 stop " + std::to_string(ids.size())));
  take(s.finish());
  if (!r.stream) {
    const nlohmann::json choice = s.response()["choices"][0];
    reply.message = choice["message"];
    reply.finish = choice["finish_reason"];
  }
  return reply;
}

}  // namespace pith::server
