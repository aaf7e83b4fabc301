// ChoiceText and CompletionSession: see completion_session.h.
#include "server/completion_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <utility>

#include "common/error.h"

namespace pith::server {

using nlohmann::json;

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  while (out.size() < n) out += fmt::format("{:016x}", rng());
  out.resize(n);
  return out;
}

// ---------------------------------------------------------------- ChoiceText

ChoiceText::ChoiceText(const Tokenizer& tokenizer, std::vector<std::string> stops,
                       std::vector<int32_t> kept)
    : decoder_(tokenizer, /*skip_special=*/true, /*at_text_start=*/false),
      tokenizer_(&tokenizer),
      kept_(std::move(kept)),
      stops_(std::move(stops)) {}

std::string ChoiceText::release(std::string s) {
  text_ += s;
  return s;
}

std::string ChoiceText::push(int32_t token) {
  if (stopped_) return "";
  held_ += decoder_.push(token);
  if (std::binary_search(kept_.begin(), kept_.end(), token))     // nothing the decoder still holds
    held_ += decoder_.flush() + tokenizer_->token_bytes(token);  // can complete across it
  size_t best = std::string::npos;
  for (const auto& s : stops_) best = std::min(best, held_.find(s));
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return release(std::move(out));
  }
  // Hold back the longest suffix that could still grow into a stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return release(std::move(out));
}

std::string ChoiceText::finish() {
  if (stopped_) return "";
  std::string out = std::move(held_) + decoder_.flush();
  held_.clear();
  return release(std::move(out));
}

// ---------------------------------------------------------------- CompletionSession

CompletionSession::CompletionSession(const CompletionRequest& request, const Tokenizer& tokenizer,
                                     std::string id, std::string model, int64_t created)
    : req_(request),
      tok_(tokenizer),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created) {
  for (const auto& prompt : req_.prompts) prompt_tokens_ += static_cast<uint32_t>(prompt.size());
  // Mistral's call and thought markers are control tokens: their text stays for the tool-call
  // parser and the reasoning splitter.
  std::vector<std::string> kept_texts;
  if (req_.chat && req_.tools.active() && req_.tool_format == ToolCallFormat::Mistral)
    kept_texts = mistral_kept_tokens();
  if (req_.chat)
    for (std::string& text : reasoning_kept_tokens(req_.reasoning))
      kept_texts.push_back(std::move(text));
  std::vector<int32_t> kept;
  for (const std::string& text : kept_texts)
    if (int32_t id = tok_.find_token(text); id >= 0 && tok_.is_special(id)) kept.push_back(id);
  std::sort(kept.begin(), kept.end());
  for (uint32_t i = 0; i < req_.n * req_.prompts.size(); ++i) {
    choices_.push_back(Choice{ChoiceText(tok_, req_.stop, kept),
                              ReasoningSplitter(req_.chat ? req_.reasoning : ReasoningFormat::None),
                              0, "", json(), 0, false});
    if (req_.chat && req_.tools.active()) choices_.back().tools = &req_.tools;
    if (req_.logprobs)
      choices_.back().logprobs = req_.chat ? json{{"content", json::array()}}
                                           : json{{"tokens", json::array()},
                                                  {"token_logprobs", json::array()},
                                                  {"top_logprobs", json::array()},
                                                  {"text_offset", json::array()}};
    if (req_.echo && !req_.chat) {
      Choice& c = choices_.back();
      const std::string& text = req_.echo_texts.at(i / req_.n);
      c.text.set_echo(text);
      for (unsigned char ch : text) c.text_offset += (ch & 0xC0) != 0x80;
      c.echo_pending = req_.stream;
    }
  }
}

void CompletionSession::emit_echo(uint32_t index, std::vector<json>& out) {
  Choice& c = choices_[index];
  if (!c.echo_pending) return;
  c.echo_pending = false;
  const json* lp = req_.logprobs ? &c.logprobs : nullptr;
  out.push_back(chunk(json::array({choice_delta(index, c.text.text(), lp, "")})));
}

void CompletionSession::on_prompt_token(const openai_protocol::PromptTokenMessage& m) {
  if (!req_.echo || !req_.logprobs || m.prompt >= req_.prompts.size()) return;
  if (m.token < 0 || static_cast<size_t>(m.token) >= tok_.vocab_size())
    fail("completion inferlet sent prompt token {}", m.token);
  const std::string& piece = tok_.token_bytes(m.token);
  json top = nullptr;
  if (m.has_logprob) {
    top = json::object();
    for (const auto& alt : m.top) {
      if (top.size() >= req_.top_logprobs) break;
      if (alt.token >= 0 && static_cast<size_t>(alt.token) < tok_.vocab_size())
        top[tok_.token_bytes(alt.token)] = alt.logprob;
    }
  }
  for (uint32_t j = 0; j < req_.n; ++j) {
    Choice& c = choices_[m.prompt * req_.n + j];
    c.logprobs["tokens"].push_back(piece);
    c.logprobs["token_logprobs"].push_back(m.has_logprob ? json(m.logprob) : json(nullptr));
    c.logprobs["top_logprobs"].push_back(top);
    c.logprobs["text_offset"].push_back(c.prompt_offset);
    for (unsigned char ch : piece) c.prompt_offset += (ch & 0xC0) != 0x80;
  }
}

bool CompletionSession::all_done() const {
  return std::all_of(choices_.begin(), choices_.end(),
                     [](const Choice& c) { return !c.finish_reason.empty(); });
}

uint32_t CompletionSession::completion_tokens() const {
  uint32_t n = 0;
  for (const auto& c : choices_) n += c.tokens;
  return n;
}

json CompletionSession::usage() const {
  uint32_t completion = completion_tokens();
  json u = {{"prompt_tokens", prompt_tokens_},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens_ + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
  // OpenAI's fields for predicted outputs: draft tokens the completion took, and those verified
  // and discarded (computed, so they cost as generated tokens do).
  if (!req_.prediction.empty())
    u["completion_tokens_details"] = {{"accepted_prediction_tokens", accepted_prediction_},
                                      {"rejected_prediction_tokens", rejected_prediction_}};
  return u;
}

json CompletionSession::chunk(json choices) {
  json c = {{"id", id_},
            {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", nullptr},
            {"choices", std::move(choices)}};
  if (req_.include_usage) c["usage"] = nullptr;
  if (req_.return_token_ids && req_.chat && !sent_prompt_ids_) {
    c["prompt_token_ids"] = req_.prompts.at(0);
    sent_prompt_ids_ = true;
  }
  return c;
}

json CompletionSession::choice_delta(uint32_t index, const std::string& text, const json* logprobs,
                                     const std::string& finish_reason,
                                     const std::string& reasoning) {
  Choice& c = choices_[index];
  json fr = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  json lp = logprobs ? *logprobs : json(nullptr);
  json out;
  if (req_.chat) {
    json delta = json::object();
    if (!c.sent_role) {
      delta["role"] = "assistant";
      c.sent_role = true;
    }
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!text.empty() || (finish_reason.empty() && reasoning.empty())) delta["content"] = text;
    out = {{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", fr}};
  } else {
    out = {{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", fr}};
  }
  if (req_.return_token_ids) {  // the tokens since the choice's last chunk (text may lag them)
    out["token_ids"] = std::move(c.unsent_ids);
    c.unsent_ids.clear();
    if (!req_.chat && !c.sent_prompt_ids) {
      out["prompt_token_ids"] = req_.prompts.at(index / req_.n);
      c.sent_prompt_ids = true;
    }
  }
  return out;
}

json CompletionSession::logprob_entry(int32_t token, double logprob,
                                      const std::vector<std::pair<int32_t, double>>& top) const {
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
    return b;
  };
  const std::string& piece = tok_.token_bytes(token);
  json e = {{"token", piece},
            {"logprob", logprob},
            {"bytes", bytes_of(piece)},
            {"top_logprobs", json::array()}};
  for (const auto& [id, lp] : top) {
    const std::string& p = tok_.token_bytes(id);
    e["top_logprobs"].push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
  }
  return e;
}

FailureResponse failure_response(pith_status_t code) {
  switch (code) {
    case PITH_ERR_OUT_OF_KV_PAGES:
    case PITH_ERR_OUT_OF_EMBEDS:
    case PITH_ERR_OUT_OF_STATES:
      return {503, "unavailable"};
    default:
      return {500, "internal"};
  }
}

std::vector<json> CompletionSession::on_message(std::string_view m) {
  namespace proto = openai_protocol;
  std::vector<json> out;
  proto::Message msg;
  std::string malformed;
  if (!proto::parse(m, msg, malformed))
    fail("completion inferlet sent a malformed message: {}", malformed);
  if (auto* e = std::get_if<proto::ErrorMessage>(&msg)) {
    if (!failure_) failure_ = std::move(*e);
    return out;
  }
  if (auto* u = std::get_if<proto::UsageMessage>(&msg)) {
    if (!usage_seen_) prompt_tokens_ = 0, cached_tokens_ = 0, usage_seen_ = true;
    prompt_tokens_ += u->prompt_tokens;
    cached_tokens_ += u->cached_tokens;
    return out;
  }
  if (auto* p = std::get_if<proto::PromptTokenMessage>(&msg)) {
    on_prompt_token(*p);
    return out;
  }
  const uint32_t index = std::visit(
      [](const auto& v) -> uint32_t {
        if constexpr (requires { v.choice; })
          return v.choice;
        else
          return 0;
      },
      msg);
  if (index >= choices_.size())
    fail("completion inferlet sent choice {} of {}", index, choices_.size());
  Choice& c = choices_[index];
  if (auto* p = std::get_if<proto::PredictionMessage>(&msg)) {
    accepted_prediction_ += p->accepted;
    rejected_prediction_ += p->rejected;
    return out;
  }
  if (auto* t = std::get_if<proto::TokenMessage>(&msg)) {
    const int32_t token = t->token;
    if (token < 0 || static_cast<size_t>(token) >= tok_.vocab_size())
      fail("completion inferlet sent token {}", token);
    ++token_messages_;
    const double lp = t->logprob;
    std::vector<std::pair<int32_t, double>> top;
    for (const auto& alt : t->top) {
      if (top.size() >= req_.top_logprobs) break;
      if (alt.token >= 0 && static_cast<size_t>(alt.token) < tok_.vocab_size())
        top.emplace_back(alt.token, alt.logprob);
    }
    if (!c.finish_reason.empty() || c.text.stopped()) return out;
    saw_token_ = true;
    emit_echo(index, out);
    ++c.tokens;
    c.logprob_sum += lp;
    if (req_.return_token_ids) {
      c.token_ids.push_back(token);
      c.unsent_ids.push_back(token);
    }
    std::string delta = c.text.push(token);
    const std::string released = delta;  // text_offset counts it, tools or not
    ReasoningSplitter::Delta split = c.reasoning.push(delta);
    delta = hold_for_tools(c, std::move(split.content));
    json lp_delta;
    if (req_.logprobs) {
      if (req_.chat) {
        lp_delta = {{"content", json::array({logprob_entry(token, lp, top)})}};
        c.logprobs["content"].push_back(lp_delta["content"][0]);
      } else {
        json top_map = json::object();
        for (const auto& [id, v] : top) top_map[tok_.token_bytes(id)] = v;
        lp_delta = {{"tokens", {tok_.token_bytes(token)}},
                    {"token_logprobs", {lp}},
                    {"top_logprobs", {top_map}},
                    {"text_offset", {c.text_offset}}};
        for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          c.logprobs[k].push_back(lp_delta[k][0]);
      }
    }
    // OpenAI's text_offset counts characters: code points of the released (complete) UTF-8.
    for (unsigned char ch : released) c.text_offset += (ch & 0xC0) != 0x80;
    const bool holding = !c.held_for_tools.empty() || c.tools_forced();
    if (req_.stream &&
        (!delta.empty() || !split.reasoning.empty() || req_.logprobs || (!c.sent_role && !holding)))
      out.push_back(chunk(json::array(
          {choice_delta(index, delta, req_.logprobs ? &lp_delta : nullptr, "", split.reasoning)})));
    if (c.text.stopped()) end_choice(index, "stop", out);
    return out;
  }
  const auto& end = std::get<proto::EndMessage>(msg);
  if (!c.finish_reason.empty()) return out;
  end_choice(index, proto::finish_reason_name(end.reason), out);
  return out;
}

bool CompletionSession::Choice::tools_forced() const {
  return tools && tools->forced();
}

const HarmonyReader* CompletionSession::harmony_calls(const Choice& c) const {
  return req_.tool_format == ToolCallFormat::Harmony ? c.reasoning.harmony() : nullptr;
}

std::string CompletionSession::hold_for_tools(Choice& c, std::string delta) {
  if (!c.tools || c.tools_decided || harmony_calls(c)) return delta;
  c.held_for_tools += delta;
  if (c.tools->forced() || may_become_tool_call(c.held_for_tools, req_.tool_format)) return "";
  c.tools_decided = true;  // plain content after all: release what was held
  return std::exchange(c.held_for_tools, std::string());
}

void CompletionSession::end_choice(uint32_t index, std::string reason, std::vector<json>& out) {
  Choice& c = choices_[index];
  emit_echo(index, out);
  ReasoningSplitter::Delta tail = c.reasoning.push(c.text.finish());
  ReasoningSplitter::Delta last = c.reasoning.finish();
  std::string rest = hold_for_tools(c, tail.content + last.content);
  const std::string reasoning_rest = tail.reasoning + last.reasoning;
  std::optional<ParsedToolOutput> parsed;
  if (const HarmonyReader* harmony = harmony_calls(c)) {
    // Messages addressed to functions the request declares are its calls; the text of any
    // other addressed message is content, after the rest.
    parsed = harmony_tool_calls(harmony->addressed(), c.tools);
    if (!parsed->content.empty()) rest += c.reasoning.append_content(parsed->content).content;
    parsed->content = std::string(trim_space(c.reasoning.content()));
  } else if (c.tools && !c.tools_decided) {
    parsed = parse_tool_output(c.held_for_tools, req_.tool_format, req_.tools);
    c.held_for_tools.clear();
    rest = parsed->content;
  }
  if (parsed) {
    c.content = parsed->content;
    for (auto& call : parsed->calls)
      c.tool_calls.push_back({req_.tool_format == ToolCallFormat::Mistral
                                  ? mistral_call_id()  // the only ids its templates read back
                                  : "call_" + random_hex(24),
                              std::move(call.name), std::move(call.arguments)});
    // The legacy function_call holds one call: the first, as one-call-per-turn models write.
    if (req_.legacy_functions && c.tool_calls.size() > 1) c.tool_calls.resize(1);
    // OpenAI: "tool_calls" ("function_call" for legacy functions) when the model chose to call,
    // "stop" when the request named the function.
    if (!c.tool_calls.empty())
      reason = req_.tools.choice == ToolRequest::Choice::Named ? "stop"
               : req_.legacy_functions                         ? "function_call"
                                                               : "tool_calls";
  }
  c.finish_reason = std::move(reason);
  if (!req_.stream) return;
  if (!rest.empty() || !reasoning_rest.empty())
    out.push_back(chunk(json::array({choice_delta(index, rest, nullptr, "", reasoning_rest)})));
  if (!c.tool_calls.empty()) out.push_back(chunk(json::array({tool_calls_delta(index)})));
  out.push_back(chunk(json::array({choice_delta(index, "", nullptr, c.finish_reason)})));
}

json CompletionSession::legacy_function_call(const Choice& c) const {
  const StoredToolCall& t = c.tool_calls.at(0);
  return {{"name", t.name}, {"arguments", t.arguments}};
}

json CompletionSession::tool_calls_json(const Choice& c, bool streaming) const {
  json calls = json::array();
  for (size_t i = 0; i < c.tool_calls.size(); ++i) {
    const StoredToolCall& t = c.tool_calls[i];
    json call = {{"id", t.id},
                 {"type", "function"},
                 {"function", {{"name", t.name}, {"arguments", t.arguments}}}};
    if (streaming) call["index"] = i;
    calls.push_back(std::move(call));
  }
  return calls;
}

json CompletionSession::tool_calls_delta(uint32_t index) {
  Choice& c = choices_[index];
  json delta = req_.legacy_functions ? json{{"function_call", legacy_function_call(c)}}
                                     : json{{"tool_calls", tool_calls_json(c, true)}};
  if (!c.sent_role) {
    delta["role"] = "assistant";
    delta["content"] = nullptr;
    c.sent_role = true;
  }
  return {{"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
}

std::vector<json> CompletionSession::finish() {
  std::vector<json> out;
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    if (!c.finish_reason.empty()) continue;
    end_choice(i, c.tokens >= req_.max_tokens ? "length" : "stop", out);
  }
  if (req_.stream && req_.include_usage) {
    json u = chunk(json::array());
    u["usage"] = usage();
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<uint32_t> CompletionSession::returned_choices() const {
  std::vector<uint32_t> order(choices_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  if (req_.returned_n == 0 || req_.returned_n >= req_.n) return order;
  // best_of: per prompt, the candidates with the highest mean token log-probability (OpenAI's
  // "highest log probability per token"), the earlier one first on a tie.
  auto mean = [&](uint32_t i) {
    const Choice& c = choices_[i];
    return c.tokens ? c.logprob_sum / c.tokens : 0.0;
  };
  std::vector<uint32_t> kept;
  for (auto first = order.begin(); first != order.end(); first += req_.n) {
    std::stable_sort(first, first + req_.n,
                     [&](uint32_t a, uint32_t b) { return mean(a) > mean(b); });
    kept.insert(kept.end(), first, first + req_.returned_n);
  }
  return kept;
}

json CompletionSession::response() const {
  json choices = json::array();
  const std::vector<uint32_t> returned = returned_choices();
  for (uint32_t k = 0; k < returned.size(); ++k) {
    const uint32_t i = returned[k];
    const Choice& c = choices_[i];
    json lp = req_.logprobs ? c.logprobs : json(nullptr);
    if (req_.chat) {
      const bool thinks = req_.reasoning != ReasoningFormat::None;
      json message = {{"role", "assistant"},
                      {"content", thinks ? c.reasoning.content() : c.text.text()}};
      if (thinks)
        message["reasoning_content"] =
            c.reasoning.reasoning().empty() ? json(nullptr) : json(c.reasoning.reasoning());
      if (!c.tool_calls.empty()) {
        message["content"] = c.content.empty() ? json(nullptr) : json(c.content);
        if (req_.legacy_functions)
          message["function_call"] = legacy_function_call(c);
        else
          message["tool_calls"] = tool_calls_json(c, false);
      }
      choices.push_back({{"index", k},
                         {"message", std::move(message)},
                         {"logprobs", lp},
                         {"finish_reason", c.finish_reason}});
    } else {
      choices.push_back({{"index", k},
                         {"text", c.text.text()},
                         {"logprobs", lp},
                         {"finish_reason", c.finish_reason}});
      if (req_.return_token_ids) choices.back()["prompt_token_ids"] = req_.prompts.at(i / req_.n);
    }
    if (req_.return_token_ids) choices.back()["token_ids"] = c.token_ids;
  }
  json r = {{"id", id_},
            {"object", req_.chat ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", nullptr},
            {"choices", std::move(choices)},
            {"usage", usage()}};
  // vLLM's return_token_ids: chat has one prompt, at the top; completions per choice (above).
  if (req_.return_token_ids && req_.chat) r["prompt_token_ids"] = req_.prompts.at(0);
  return r;
}

}  // namespace pith::server
