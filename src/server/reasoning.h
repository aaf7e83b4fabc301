// Reasoning models write their thinking between <think> and </think> before the answer. The
// OpenAI-compatible responses carry it apart, as `reasoning_content` beside `content` (streamed
// as delta.reasoning_content), the way vLLM's reasoning parsers do:
//   deepseek_r1  the generation prompt opens the thought (the template ends with "<think>"), so
//                the output starts inside it; everything before "</think>" is reasoning, and an
//                output without "</think>" is all reasoning (the budget ended the thought);
//   qwen3        the model opens the thought itself: reasoning only when the output starts
//                with "<think>"; otherwise it is all content.
// A thought cut short by max_tokens stays reasoning in both, streamed or not.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pith {
class ChatTemplate;
}

namespace pith::server {

enum class ReasoningFormat { None, DeepSeekR1, Qwen3 };

const char* reasoning_format_name(ReasoningFormat f);
// "none", "deepseek_r1", "qwen3"; nullopt for anything else.
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);
// From the template: deepseek_r1 when its generation prompt ends inside a thought, qwen3 when
// it knows </think> otherwise, none for templates without thoughts.
ReasoningFormat detect_reasoning_format(const ChatTemplate& chat_template);
// Whether a rendered prompt ends inside an open thought ("<think>" and whitespace at its end):
// a template-detected format then reads the output as deepseek_r1, otherwise as qwen3 (Qwen3.5
// and Qwen3 close the thought in the prompt when a request turns thinking off).
bool prompt_opens_thought(std::string_view prompt);

// Splits one choice's text, as it becomes final, into reasoning and content.
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningFormat format);

  struct Delta {
    std::string reasoning, content;
  };
  // The newly final text; returns what can be released now (a possible tag prefix is held).
  Delta push(std::string_view text);
  // At the end: whatever was held.
  Delta finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  enum class State { Start, Thinking, Answer };
  Delta release(std::string reasoning, std::string content);

  State state_;
  bool r1_ = false;  // deepseek_r1: text before any tag is already reasoning
  std::string held_;
  std::string reasoning_, content_;
};

}  // namespace pith::server
