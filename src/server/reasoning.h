// Reasoning models write their thinking between <think> and </think> before the answer (Gemma 4:
// between <|channel>thought and <channel|>). The OpenAI-compatible responses carry it apart, as
// `reasoning_content` beside `content` (streamed as delta.reasoning_content), the way vLLM's
// reasoning parsers do:
//   deepseek_r1  the generation prompt opens the thought (the template ends with "<think>"), so
//                the output starts inside it; everything before "</think>" is reasoning, and an
//                output without "</think>" is all reasoning (the budget ended the thought);
//   qwen3        the model opens the thought itself: reasoning only when the output starts
//                with "<think>"; otherwise it is all content;
//   gemma4       <|channel>thought ... <channel|> blocks anywhere in the output are reasoning
//                (the whitespace after "thought" dropped), the rest is content; a <|channel> of
//                another name and a <channel|> that closes nothing are dropped (llama.cpp's
//                peg-gemma4 format). The prompt never leaves a thought open: with thinking off,
//                Gemma 4's template ends it with an empty one.
//   mistral      Magistral and Ministral reasoning models: qwen3's rule with the control tokens
//                [THINK] and [/THINK] (kept in the text for the splitter, as the tool-call
//                markers are), which the model writes itself when its system prompt asks.
//   harmony      gpt-oss: analysis messages are reasoning, final and commentary messages content,
//                messages addressed to a tool are kept apart as calls (harmony.h); vLLM's
//                "openai_gptoss".
// A thought cut short by max_tokens stays reasoning in both, streamed or not.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/harmony.h"

namespace pith {
class ChatTemplate;
}

namespace pith::server {

enum class ReasoningFormat { None, DeepSeekR1, Qwen3, Gemma4, Mistral, Harmony };

const char* reasoning_format_name(ReasoningFormat f);
// "none", "deepseek_r1", "qwen3", "gemma4", "mistral", "harmony" (or "openai_gptoss"); nullopt
// for anything else.
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);
// From the template: harmony for gpt-oss's, gemma4 when it writes <channel|>, mistral when it
// writes [/THINK],
// deepseek_r1 when its generation prompt
// ends inside a thought, qwen3 when it knows </think> otherwise, none for templates without
// thoughts.
ReasoningFormat detect_reasoning_format(const ChatTemplate& chat_template);
// Whether a rendered prompt ends inside an open thought ("<think>" and whitespace at its end):
// a template-detected format then reads the output as deepseek_r1, otherwise as qwen3 (Qwen3.5
// and Qwen3 close the thought in the prompt when a request turns thinking off).
bool prompt_opens_thought(std::string_view prompt);
// The format one chat request's output is read in, for a format detected from the template:
// the <think> formats follow prompt_opens_thought, the others stay as they are.
ReasoningFormat format_for_prompt(ReasoningFormat detected, bool prompt_opens_thought);
// The control tokens a format's splitter reads in the output text (mistral's [THINK], [/THINK]).
std::vector<std::string> reasoning_kept_tokens(ReasoningFormat f);

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

  // Text that becomes content after the output (a harmony message that is not a call): after
  // a blank line when content came before.
  Delta append_content(std::string_view text);

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  // The harmony format's reader (its addressed messages), null for the others.
  const HarmonyReader* harmony() const { return harmony_.get(); }

 private:
  // ChannelName and ThoughtSpace (gemma4 only): after "<|channel>", reading "thought" and the
  // whitespace after it.
  enum class State { Start, Thinking, Answer, ChannelName, ThoughtSpace };
  Delta release(std::string reasoning, std::string content);
  // gemma4's Answer state: content up to the next channel marker.
  bool answer_until_channel(std::string& content);

  State state_;
  bool r1_ = false;  // deepseek_r1: text before any tag is already reasoning
  bool gemma4_ = false;
  std::string_view open_;   // the tag that opens a thought (deepseek_r1, qwen3, mistral)
  std::string_view close_;  // the tag that ends a thought
  std::string held_;
  std::string reasoning_, content_;
  std::unique_ptr<HarmonyReader> harmony_;
};

}  // namespace pith::server
