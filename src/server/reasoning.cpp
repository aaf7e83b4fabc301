#include "server/reasoning.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat_template/chat_template.h"
#include "server/tool_calls.h"

namespace pith::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kThoughtChannel = "thought";
constexpr std::string_view kMistralOpen = "[THINK]";
constexpr std::string_view kMistralClose = "[/THINK]";

bool starts_with_space_then(std::string_view s, std::string_view tag, size_t* at) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  *at = i;
  return s.substr(i, tag.size()) == tag;
}

}  // namespace

const char* reasoning_format_name(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::DeepSeekR1:
      return "deepseek_r1";
    case ReasoningFormat::Qwen3:
      return "qwen3";
    case ReasoningFormat::Gemma4:
      return "gemma4";
    case ReasoningFormat::Mistral:
      return "mistral";
    case ReasoningFormat::Harmony:
      return "harmony";
    case ReasoningFormat::None:
      break;
  }
  return "none";
}

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "none") return ReasoningFormat::None;
  if (name == "deepseek_r1") return ReasoningFormat::DeepSeekR1;
  if (name == "qwen3") return ReasoningFormat::Qwen3;
  if (name == "gemma4") return ReasoningFormat::Gemma4;
  if (name == "mistral") return ReasoningFormat::Mistral;
  if (name == "harmony" || name == "openai_gptoss") return ReasoningFormat::Harmony;
  return std::nullopt;
}

ReasoningFormat detect_reasoning_format(const ChatTemplate& t) {
  if (is_harmony_template(t.source())) return ReasoningFormat::Harmony;
  if (t.source().find(kChannelClose) != std::string::npos) return ReasoningFormat::Gemma4;
  if (t.source().find(kMistralClose) != std::string::npos) return ReasoningFormat::Mistral;
  if (t.source().find(kClose) == std::string::npos) return ReasoningFormat::None;
  std::string prompt;
  try {
    nlohmann::ordered_json vars = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                   {"add_generation_prompt", true}};
    prompt = t.render(ChatTemplate::variables_for(vars));
  } catch (const std::exception&) {
    return ReasoningFormat::Qwen3;
  }
  return prompt_opens_thought(prompt) ? ReasoningFormat::DeepSeekR1 : ReasoningFormat::Qwen3;
}

bool prompt_opens_thought(std::string_view prompt) {
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' '))
    prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

ReasoningFormat format_for_prompt(ReasoningFormat detected, bool opens_thought) {
  if (detected != ReasoningFormat::DeepSeekR1 && detected != ReasoningFormat::Qwen3)
    return detected;
  return opens_thought ? ReasoningFormat::DeepSeekR1 : ReasoningFormat::Qwen3;
}

std::vector<std::string> reasoning_kept_tokens(ReasoningFormat f) {
  if (f != ReasoningFormat::Mistral) return {};
  return {std::string(kMistralOpen), std::string(kMistralClose)};
}

// The <think> formats (and mistral's [THINK]) start by looking for an opening tag (DeepSeek R1 may
// repeat the one its prompt ends with); without one, R1's text is already the thought and Qwen3's
// is the answer. Gemma 4 starts in the answer and enters a thought at every <|channel>thought.
ReasoningSplitter::ReasoningSplitter(ReasoningFormat f)
    : state_(f == ReasoningFormat::None || f == ReasoningFormat::Gemma4 ? State::Answer
                                                                        : State::Start),
      r1_(f == ReasoningFormat::DeepSeekR1),
      gemma4_(f == ReasoningFormat::Gemma4),
      open_(f == ReasoningFormat::Mistral ? kMistralOpen : kOpen),
      close_(gemma4_                         ? kChannelClose
             : f == ReasoningFormat::Mistral ? kMistralClose
                                             : kClose) {
  if (f == ReasoningFormat::Harmony) harmony_ = std::make_unique<HarmonyReader>();
}

ReasoningSplitter::Delta ReasoningSplitter::release(std::string reasoning, std::string content) {
  reasoning_ += reasoning;
  content_ += content;
  return {std::move(reasoning), std::move(content)};
}

ReasoningSplitter::Delta ReasoningSplitter::append_content(std::string_view text) {
  return release("", (content_.empty() ? "" : "\n\n") + std::string(text));
}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  if (harmony_) {
    HarmonyReader::Delta d = harmony_->push(text);
    return release(std::move(d.reasoning), std::move(d.content));
  }
  held_ += text;
  std::string reasoning, content;
  for (;;) {
    if (state_ == State::Answer) {
      if (gemma4_) {
        if (answer_until_channel(content)) continue;
        break;
      }
      content += held_;
      held_.clear();
      break;
    }
    if (state_ == State::ChannelName) {
      if (held_.starts_with(kThoughtChannel)) {
        held_.erase(0, kThoughtChannel.size());
        state_ = State::ThoughtSpace;
        continue;
      }
      if (kThoughtChannel.starts_with(held_)) break;  // still possibly "thought"
      state_ = State::Answer;  // another channel: its marker is dropped, its text is content
      continue;
    }
    if (state_ == State::ThoughtSpace) {
      const size_t text = held_.find_first_not_of(" \t\r\n");
      held_.erase(0, text == std::string::npos ? held_.size() : text);
      if (held_.empty()) break;
      state_ = State::Thinking;
      continue;
    }
    if (state_ == State::Start) {
      size_t at = 0;
      if (starts_with_space_then(held_, open_, &at)) {
        held_.erase(0, at + open_.size());
        state_ = State::Thinking;
        continue;
      }
      // Still possibly the opening tag (or only whitespace so far): wait.
      std::string_view rest = std::string_view(held_).substr(at);
      if (rest.size() < open_.size() && open_.substr(0, rest.size()) == rest) break;
      state_ = r1_ ? State::Thinking : State::Answer;
      continue;
    }
    // Thinking.
    const size_t close = held_.find(close_);
    if (close != std::string::npos) {
      reasoning += held_.substr(0, close);
      held_.erase(0, close + close_.size());
      state_ = State::Answer;
      continue;
    }
    const size_t keep = partial_marker(held_, close_);
    reasoning += held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    break;
  }
  return release(std::move(reasoning), std::move(content));
}

// Moves the content before the first channel marker in held_ to `content`; true when a marker
// was found (and consumed: "<|channel>" starts a channel, a stray "<channel|>" is dropped). A
// possible marker prefix at the end stays held.
bool ReasoningSplitter::answer_until_channel(std::string& content) {
  const size_t open = held_.find(kChannelOpen), close = held_.find(kChannelClose);
  const size_t at = std::min(open, close);
  if (at != std::string::npos) {
    content += held_.substr(0, at);
    const bool opens = at == open;
    held_.erase(0, at + (opens ? kChannelOpen : kChannelClose).size());
    if (opens) state_ = State::ChannelName;
    return true;
  }
  const size_t keep =
      std::max(partial_marker(held_, kChannelOpen), partial_marker(held_, kChannelClose));
  content += held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  if (harmony_) {
    HarmonyReader::Delta d = harmony_->finish();
    return release(std::move(d.reasoning), std::move(d.content));
  }
  std::string rest = std::exchange(held_, std::string());
  if (state_ == State::Thinking || state_ == State::ThoughtSpace)
    return release(std::move(rest), "");
  if (state_ == State::Start && r1_) return release(std::move(rest), "");
  return release("", std::move(rest));
}

}  // namespace pith::server
