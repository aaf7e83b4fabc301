// HarmonyReader: see harmony.h.
#include "server/harmony.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

namespace pith::server {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
// Control tokens that end generation: not in the text unless a vocabulary renders them.
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
// A header is a few words; longer text before <|message|> is not one.
constexpr size_t kMaxHeader = 256;

// What a header may start with when no <|start|> precedes it (the first message, whose role
// the prompt wrote, or a model that skips <|start|>).
constexpr std::string_view kHeaderStarts[] = {kChannel, kConstrain, " to=", "to="};

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The channel and the recipient a header names. Words are separated by spaces and by the
// markers; "to=X" is the recipient wherever it stands, the first word after <|channel|> the
// channel. The role (before <|channel|>) and the content type (" json", after <|constrain|>)
// are not needed.
void parse_header(std::string_view h, std::string* channel, std::string* recipient) {
  bool in_channel = false;
  while (!h.empty()) {
    if (h.starts_with(kChannel)) {
      h.remove_prefix(kChannel.size());
      in_channel = true;
      continue;
    }
    if (h.starts_with(kConstrain)) {
      h.remove_prefix(kConstrain.size());
      in_channel = false;
      continue;
    }
    if (is_space(h.front())) {
      h.remove_prefix(1);
      continue;
    }
    size_t end = 0;
    while (end < h.size() && !is_space(h[end]) && h.substr(end, 2) != "<|") ++end;
    if (end == 0) end = 1;  // a "<|" that opens no marker: skip it
    const std::string_view word = h.substr(0, end);
    h.remove_prefix(end);
    if (word.starts_with("to="))
      *recipient = std::string(word.substr(3));
    else if (in_channel && channel->empty())
      *channel = std::string(word);
  }
}

}  // namespace

size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, s.size()); k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

void HarmonyReader::open_message(Kind kind) {
  kind_ = kind;
  message_has_text_ = false;
  state_ = State::Body;
}

void HarmonyReader::open_message(std::string_view header) {
  std::string channel, recipient;
  parse_header(header, &channel, &recipient);
  if (!recipient.empty()) {
    addressed_.push_back({std::move(recipient), std::move(channel), "", false});
    open_message(Kind::Addressed);
    return;
  }
  open_message(channel == "analysis" ? Kind::Reasoning : Kind::Content);
}

void HarmonyReader::body_text(std::string_view text, Delta& out) {
  if (text.empty()) return;
  if (kind_ == Kind::Addressed) {
    addressed_.back().body += text;
    return;
  }
  // Separate messages of one stream by a blank line, as distinct paragraphs.
  bool& had = kind_ == Kind::Reasoning ? had_reasoning_ : had_content_;
  std::string& into = kind_ == Kind::Reasoning ? out.reasoning : out.content;
  if (!message_has_text_ && had) into += "\n\n";
  into += text;
  message_has_text_ = had = true;
}

HarmonyReader::Delta HarmonyReader::push(std::string_view text) {
  held_ += text;
  Delta out;
  for (;;) {
    if (state_ == State::Start || state_ == State::Between) {
      if (state_ == State::Between) {
        const size_t text_at = held_.find_first_not_of(" \t\r\n");
        held_.erase(0, text_at == std::string::npos ? held_.size() : text_at);
        if (held_.empty()) break;
      }
      if (held_.starts_with(kStart)) {
        held_.erase(0, kStart.size());
        state_ = State::Header;  // the role, then the header
        continue;
      }
      bool header = false, maybe = kStart.starts_with(held_);
      for (std::string_view s : kHeaderStarts) {
        header |= held_.starts_with(s);
        maybe |= s.starts_with(held_);
      }
      if (header) {
        state_ = State::Header;
        continue;
      }
      if (maybe) break;             // still possibly a header: wait
      open_message(Kind::Content);  // no header: plain text
      continue;
    }
    if (state_ == State::Header) {
      const size_t message = held_.find(kMessage);
      if (message == std::string::npos) {
        // A header that runs on, or holds a message end, was not one: its text is content.
        if (held_.size() > kMaxHeader || held_.find(kEnd) != std::string::npos) {
          open_message(Kind::Content);
          continue;
        }
        break;
      }
      open_message(std::string_view(held_).substr(0, message));
      held_.erase(0, message + kMessage.size());
      continue;
    }
    // Body: up to the marker that ends it; <|start|> without <|end|> starts the next message.
    size_t end = std::string::npos;
    std::string_view marker;
    for (std::string_view m : {kEnd, kStart, kCall, kReturn})
      if (size_t at = held_.find(m); at < end) end = at, marker = m;
    if (end != std::string::npos) {
      body_text(std::string_view(held_).substr(0, end), out);
      if (kind_ == Kind::Addressed) addressed_.back().ended = true;
      held_.erase(0, end + marker.size());
      state_ = marker == kStart ? State::Header : State::Between;
      continue;
    }
    size_t keep = 0;
    for (std::string_view m : {kEnd, kStart, kCall, kReturn})
      keep = std::max(keep, partial_marker(held_, m));
    body_text(std::string_view(held_).substr(0, held_.size() - keep), out);
    held_.erase(0, held_.size() - keep);
    break;
  }
  return out;
}

HarmonyReader::Delta HarmonyReader::finish() {
  Delta out;
  std::string rest = std::exchange(held_, std::string());
  if (state_ == State::Body) {
    body_text(rest, out);
  } else if (state_ != State::Header) {
    // Text that was still possibly a header is content; an unfinished header is markup.
    const size_t text_at = rest.find_first_not_of(" \t\r\n");
    if (text_at != std::string::npos) {
      open_message(Kind::Content);
      body_text(rest, out);
    }
  }
  return out;
}

}  // namespace pith::server
