// Gemma 4's tool-call format (what its chat template writes, and llama.cpp's peg-gemma4 chat
// parser reads):
//   <|tool_call>call:NAME{key:VALUE,key:VALUE}<tool_call|>
// one block per call, back to back; the model then ends its output with <|tool_response> (an
// end-of-generation token) and waits for the results. A VALUE is
//   <|"|>text<|"|>                 a string: raw text up to the next <|"|>, no escapes
//   {key:VALUE,...}  [VALUE,...]   objects (keys unquoted, up to ':') and arrays
//   a JSON number, true, false, null
// with optional whitespace after '{', '[', ':' and ',' and before '}' and ']'. Parsing turns the
// arguments into compact JSON (keys in the order written, numbers as written), as llama.cpp
// does; a key written as <|"|>key<|"|> (the quoting the template uses inside tool
// declarations) is read as key. The forced-call grammar writes each function's arguments to its
// parameters schema (the JSON Schema converter in Gemma 4's value syntax), where llama.cpp's
// fixes only the names and the value syntax.
//
// Gemma 4's first published template (the one early GGUF files carry) knows no `tool` messages:
// it shows results only as `tool_responses` on the assistant turn that made the calls.
// gemma4_tool_turns rewrites an OpenAI conversation into that shape, as llama.cpp does for it.
#include <fmt/format.h>

#include <cctype>

#include "server/tool_calls.h"

namespace pith::server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kCallPrefix = "call:";
constexpr std::string_view kQuote = "<|\"|>";
// Nesting beyond this is refused: the parser recurses once per level.
constexpr int kMaxDepth = 64;

// Reads Gemma 4 values from a text and writes them as JSON; every method returns false on text
// that is not a well-formed value (the caller then treats the block as content).
class ValueReader {
 public:
  explicit ValueReader(std::string_view text) : s_(text) {}

  bool object(std::string& out, int depth = 0) {
    if (depth > kMaxDepth || !take('{')) return false;
    out += '{';
    skip_space();
    if (take('}')) return out += '}', true;
    for (bool first = true;; first = false) {
      if (!first) out += ',';
      std::string_view key;
      if (!object_key(key)) return false;
      out += nlohmann::json(std::string(key)).dump();
      out += ':';
      skip_space();
      if (!value(out, depth + 1)) return false;
      skip_space();
      if (take('}')) return out += '}', true;
      if (!take(',')) return false;
      skip_space();
    }
  }

  bool at_end() const { return at_ == s_.size(); }
  void skip_space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }

 private:
  bool take(char c) {
    if (at_ >= s_.size() || s_[at_] != c) return false;
    ++at_;
    return true;
  }
  bool take(std::string_view word) {
    if (s_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  // Up to ':' (no '}' inside, at least one character), or a <|"|>-quoted key.
  bool object_key(std::string_view& key) {
    if (take(kQuote)) {
      const size_t end = s_.find(kQuote, at_);
      if (end == std::string_view::npos) return false;
      key = s_.substr(at_, end - at_);
      at_ = end + kQuote.size();
      return take(':');
    }
    const size_t end = s_.find_first_of(":}", at_);
    if (end == std::string_view::npos || s_[end] != ':' || end == at_) return false;
    key = s_.substr(at_, end - at_);
    at_ = end + 1;
    return true;
  }

  bool value(std::string& out, int depth) {
    if (depth > kMaxDepth || at_ >= s_.size()) return false;
    if (take(kQuote)) {
      const size_t end = s_.find(kQuote, at_);
      if (end == std::string_view::npos) return false;
      out += nlohmann::json(std::string(s_.substr(at_, end - at_)))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      at_ = end + kQuote.size();
      return true;
    }
    const char c = s_[at_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    for (std::string_view word : {"true", "false", "null"})
      if (take(word)) return out += word, true;
    return number(out);
  }

  bool array(std::string& out, int depth) {
    take('[');
    out += '[';
    skip_space();
    if (take(']')) return out += ']', true;
    for (bool first = true;; first = false) {
      if (!first) out += ',';
      if (!value(out, depth + 1)) return false;
      skip_space();
      if (take(']')) return out += ']', true;
      if (!take(',')) return false;
      skip_space();
    }
  }

  // A JSON number, copied as written.
  bool number(std::string& out) {
    const size_t start = at_;
    auto digits = [&] {
      const size_t from = at_;
      while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_]))) ++at_;
      return at_ > from;
    };
    take('-');
    if (!take('0') && !digits()) return false;
    if (take('.') && !digits()) return false;
    if (take('e') || take('E')) {
      if (!take('+')) take('-');
      if (!digits()) return false;
    }
    out += s_.substr(start, at_ - start);
    return true;
  }

  std::string_view s_;
  size_t at_ = 0;
};

// The call in one block body ("call:NAME{...}"), if it is a well-formed call to a known function.
std::optional<ToolCall> gemma4_call(std::string_view body, const ToolRequest& r) {
  body = trim_space(body);
  if (body.substr(0, kCallPrefix.size()) != kCallPrefix) return std::nullopt;
  body.remove_prefix(kCallPrefix.size());
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  const std::string name(trim_space(body.substr(0, brace)));
  bool known = false;
  for (const auto& fn : r.functions) known |= fn.name == name;
  if (!known) return std::nullopt;
  ValueReader reader(body.substr(brace));
  std::string arguments;
  if (!reader.object(arguments)) return std::nullopt;
  reader.skip_space();
  if (!reader.at_end()) return std::nullopt;
  return ToolCall{name, std::move(arguments)};
}

}  // namespace

ParsedToolOutput parse_gemma4_tool_output(std::string_view text, const ToolRequest& r) {
  return parse_tool_call_blocks(text, kCallOpen, kCallClose,
                                [&](std::string_view body) { return gemma4_call(body, r); });
}

std::string gemma4_tool_call_grammar(const ToolRequest& r, int max_calls) {
  // Each function's parameters schema becomes a $def of one schema written in Gemma 4's value
  // syntax, so that the arguments of a forced call satisfy it (the converter names the rule of
  // "#/$defs/vN" def-vN); a function without parameters takes any object.
  const auto [calls, values] = forced_call_rules(r, "", ValueSyntax::Gemma4);
  return fmt::format(
      "root ::= tool-call{}\n"
      "tool-call ::= \"<|tool_call>call:\" ({}) \"<tool_call|>\"\n{}",
      max_calls > 1 ? fmt::format(" tool-call{{0,{}}}", max_calls - 1) : "", calls, values);
}

bool gemma4_needs_tool_turns(std::string_view source) {
  const bool gemma4_calls = source.find("'<|tool_call>call:'") != std::string_view::npos;
  const bool reads_tool_role = source.find("!= 'tool'") != std::string_view::npos ||
                               source.find("== 'tool'") != std::string_view::npos;
  return gemma4_calls && !reads_tool_role;
}

ordered_json gemma4_tool_turns(const ordered_json& messages) {
  auto role_of = [](const ordered_json& m) { return m.value("role", std::string()); };
  auto has_calls = [](const ordered_json& m) {
    auto c = m.find("tool_calls");
    return c != m.end() && c->is_array() && !c->empty();
  };
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size();) {
    const ordered_json& m = messages[i++];
    if (role_of(m) != "assistant" || !has_calls(m)) {
      out.push_back(m);
      continue;
    }
    // The calls, then one response per following tool message (named by the call in the same
    // position, else by its tool_call_id; JSON content parsed), then the answer that follows.
    ordered_json turn = {{"role", "assistant"}, {"tool_calls", m["tool_calls"]}};
    ordered_json responses = ordered_json::array();
    for (; i < messages.size() && role_of(messages[i]) == "tool"; ++i) {
      const ordered_json& result = messages[i];
      std::string name;
      if (responses.size() < m["tool_calls"].size()) {
        const ordered_json& call = m["tool_calls"][responses.size()];
        if (call.contains("function") && call["function"].is_object())
          name = call["function"].value("name", std::string());
      }
      if (name.empty()) name = result.value("tool_call_id", std::string());
      ordered_json response = result.value("content", ordered_json());
      if (response.is_string()) {
        ordered_json parsed = ordered_json::parse(response.get<std::string>(), nullptr, false);
        if (!parsed.is_discarded()) response = std::move(parsed);
      }
      responses.push_back({{"name", name}, {"response", std::move(response)}});
    }
    if (!responses.empty()) turn["tool_responses"] = std::move(responses);
    if (i < messages.size() && role_of(messages[i]) == "assistant" && !has_calls(messages[i])) {
      const ordered_json& content = messages[i].value("content", ordered_json());
      if ((content.is_string() && !content.get<std::string>().empty()) ||
          (content.is_array() && !content.empty())) {
        turn["content"] = content;
        ++i;
      }
    }
    if (auto r = m.find("reasoning_content"); r != m.end() && r->is_string())
      turn["reasoning_content"] = *r;
    out.push_back(std::move(turn));
  }
  return out;
}

}  // namespace pith::server
