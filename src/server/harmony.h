// gpt-oss writes harmony, OpenAI's message format for it. A turn is a series of messages
//   [<|start|>ROLE] HEADER <|message|> BODY (<|end|> | <|call|> | <|return|>)
// whose header names a channel (<|channel|>analysis, commentary or final), may address the
// message to a recipient (" to=functions.NAME", before or after the channel) and may name the
// body's type (" json", " <|constrain|>json"). The generation prompt opens the first message
// ("<|start|>assistant"), so an output starts at that message's header. <|end|> closes a
// message and the turn goes on; <|call|> and <|return|> end generation (control tokens, not in
// the text). The header markers and <|end|> are user-defined tokens (token_roles.cpp), so they
// are in the decoded text this reader reads.
//
// The chat endpoint serves analysis messages as reasoning_content, final and commentary
// messages (a commentary message without a recipient is a preamble meant for the user) as
// content, and addressed messages as tool calls (tool_calls_harmony.cpp). Text before any
// header, from a model that skips it, is content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pith::server {

// The length of the longest suffix of `s` that is a proper prefix of `marker`: the text a
// streaming reader holds back until it knows whether the marker follows (the <think> splitter's
// too).
size_t partial_marker(std::string_view s, std::string_view marker);

class HarmonyReader {
 public:
  struct Delta {
    std::string reasoning, content;
  };
  // A message with a recipient: a call of a function ("functions.NAME") or of a built-in tool.
  struct Addressed {
    std::string recipient, channel, body;
    bool ended = false;  // closed by a marker in the text (else generation ended inside it)
  };

  // The newly final text; returns the reasoning and content it completes (a possible marker
  // prefix at its end is held).
  Delta push(std::string_view text);
  // At the end: whatever was held.
  Delta finish();

  const std::vector<Addressed>& addressed() const { return addressed_; }

 private:
  enum class State { Start, Header, Body, Between };
  enum class Kind { Reasoning, Content, Addressed };

  void open_message(std::string_view header);
  void open_message(Kind kind);
  void body_text(std::string_view text, Delta& out);

  State state_ = State::Start;
  Kind kind_ = Kind::Content;
  bool message_has_text_ = false;
  bool had_reasoning_ = false, had_content_ = false;  // earlier messages' text, for separators
  std::string held_;
  std::vector<Addressed> addressed_;
};

}  // namespace pith::server
