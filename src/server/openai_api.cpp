#include "server/openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat_template/chat_template.h"
#include "common/error.h"

namespace pith::server {

using nlohmann::json;

namespace {

template <typename... Args>
[[noreturn]] void bad(std::string param, fmt::format_string<Args...> f, Args&&... args) {
  throw InvalidRequest(std::move(param), fmt::format(f, std::forward<Args>(args)...));
}

// Reads an optional number field with a range check.
template <typename T>
std::optional<T> number_field(const json& body, const char* key, double lo, double hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) bad(key, "'{}' must be a number", key);
  double v = it->get<double>();
  if (std::is_integral_v<T> && v != std::floor(v)) bad(key, "'{}' must be an integer", key);
  if (!(v >= lo && v <= hi)) bad(key, "'{}' must be between {} and {}, got {}", key, lo, hi, v);
  return static_cast<T>(v);
}

std::optional<bool> bool_field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad(key, "'{}' must be a boolean", key);
  return it->get<bool>();
}

int32_t token_id(const json& v, const Tokenizer& tok, const char* param) {
  if (!v.is_number_integer()) bad(param, "'{}' must hold integer token ids", param);
  int64_t id = v.get<int64_t>();
  if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
    bad(param, "token {} in '{}' is outside the vocabulary of {} tokens", id, param,
        tok.vocab_size());
  return static_cast<int32_t>(id);
}

std::vector<int32_t> tokens_of(const json& arr, const Tokenizer& tok, const char* param) {
  std::vector<int32_t> out;
  for (const auto& v : arr) out.push_back(token_id(v, tok, param));
  return out;
}

std::string message_content(const json& m) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // content parts: only text is supported by a text-only model
    std::string out;
    for (const auto& part : *it) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        bad("messages", "only text content parts are supported by this model");
      out += part["text"].get<std::string>();
    }
    return out;
  }
  bad("messages", "message 'content' must be a string or an array of text parts");
}

// Every request field, and what this server does with it. Fields that do not change the output
// are accepted; fields whose feature is missing are refused by name; unknown ones too (a client
// must never believe that a field it sent took effect when it did not).
enum class Field { Used, Accepted, Unsupported };
struct FieldRule {
  const char* name;
  Field what;
  bool chat, completions;
};
constexpr FieldRule kFields[] = {
    {"model", Field::Used, true, true},
    {"messages", Field::Used, true, false},
    {"prompt", Field::Used, false, true},
    {"stream", Field::Used, true, true},
    {"stream_options", Field::Used, true, true},
    {"max_tokens", Field::Used, true, true},
    {"max_completion_tokens", Field::Used, true, false},
    {"temperature", Field::Used, true, true},
    {"top_p", Field::Used, true, true},
    {"top_k", Field::Used, true, true},
    {"min_p", Field::Used, true, true},
    {"seed", Field::Used, true, true},
    {"n", Field::Used, true, true},
    {"stop", Field::Used, true, true},
    {"logprobs", Field::Used, true, true},
    {"top_logprobs", Field::Used, true, false},
    {"presence_penalty", Field::Used, true, true},
    {"frequency_penalty", Field::Used, true, true},
    {"repetition_penalty", Field::Used, true, true},
    {"logit_bias", Field::Used, true, true},
    {"min_tokens", Field::Used, true, true},
    {"ignore_eos", Field::Used, true, true},
    {"stop_token_ids", Field::Used, true, true},
    {"echo", Field::Used, false, true},  // false only; true is refused below
    // No effect on the output: annotations and storage/routing hints of OpenAI's platform.
    {"user", Field::Accepted, true, true},
    {"metadata", Field::Accepted, true, true},
    {"store", Field::Accepted, true, true},
    {"service_tier", Field::Accepted, true, true},
    {"safety_identifier", Field::Accepted, true, true},
    {"prompt_cache_key", Field::Accepted, true, true},  // the prefix cache is always on
    // Features this server does not have (yet).
    {"tools", Field::Unsupported, true, false},
    {"tool_choice", Field::Unsupported, true, false},
    {"parallel_tool_calls", Field::Unsupported, true, false},
    {"functions", Field::Unsupported, true, false},
    {"function_call", Field::Unsupported, true, false},
    {"response_format", Field::Unsupported, true, false},
    {"audio", Field::Unsupported, true, false},
    {"modalities", Field::Unsupported, true, false},
    {"prediction", Field::Unsupported, true, false},
    {"reasoning_effort", Field::Unsupported, true, false},
    {"verbosity", Field::Unsupported, true, false},
    {"web_search_options", Field::Unsupported, true, false},
    {"suffix", Field::Unsupported, false, true},
    {"best_of", Field::Unsupported, false, true},
};

void check_fields(const json& body, bool chat) {
  for (const auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const auto& f : kFields)
      if (key == f.name) rule = &f;
    const bool applies = rule && (chat ? rule->chat : rule->completions);
    if (!applies)
      bad(key, "unrecognized request argument '{}' for {}", key,
          chat ? "/v1/chat/completions" : "/v1/completions");
    if (rule->what == Field::Unsupported && !value.is_null())
      bad(key, "'{}' is not supported by this server", key);
  }
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const json& messages_field, const Tokenizer& tok,
                                        const ChatTemplate& chat_template,
                                        bool add_generation_prompt) {
  if (!messages_field.is_array() || messages_field.empty())
    bad("messages", "'messages' must be a non-empty array");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const auto& m : messages_field) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad("messages", "every message needs a string 'role'");
    messages.push_back({{"role", m["role"].get<std::string>()}, {"content", message_content(m)}});
  }
  nlohmann::ordered_json vars = {{"messages", messages},
                                 {"add_generation_prompt", add_generation_prompt}};
  if (!tok.bos_text().empty()) vars["bos_token"] = tok.bos_text();
  if (!tok.eos_text().empty()) vars["eos_token"] = tok.eos_text();
  std::string text;
  try {
    text = chat_template.render(ChatTemplate::variables_for(vars));
  } catch (const std::exception& e) {
    bad("messages", "chat template: {}", e.what());
  }
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
}

std::vector<std::string> CompletionRequest::inferlet_args() const {
  std::string ids;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i) ids += ',';
    ids += std::to_string(prompt[i]);
  }
  std::vector<std::string> a = {"--tokens",      ids,
                                "--max-tokens",  std::to_string(max_tokens),
                                "--temperature", fmt::format("{}", temperature),
                                "--top-p",       fmt::format("{}", top_p),
                                "--top-k",       std::to_string(top_k),
                                "--min-p",       fmt::format("{}", min_p),
                                "--seed",        std::to_string(seed),
                                "--n",           std::to_string(n)};
  if (logprobs)
    a.insert(a.end(), {"--logprobs", std::to_string(std::max<uint32_t>(top_logprobs, 1))});
  for (const auto& s : stop) a.insert(a.end(), {"--stop", s});
  if (presence_penalty != 0)
    a.insert(a.end(), {"--presence-penalty", fmt::format("{}", presence_penalty)});
  if (frequency_penalty != 0)
    a.insert(a.end(), {"--frequency-penalty", fmt::format("{}", frequency_penalty)});
  if (repetition_penalty != 1)
    a.insert(a.end(), {"--repetition-penalty", fmt::format("{}", repetition_penalty)});
  if (!logit_bias.empty()) {
    std::string b;
    for (const auto& [id, v] : logit_bias) b += fmt::format("{}{}:{}", b.empty() ? "" : ",", id, v);
    a.insert(a.end(), {"--logit-bias", b});
  }
  if (min_tokens) a.insert(a.end(), {"--min-tokens", std::to_string(min_tokens)});
  if (ignore_eos) a.insert(a.end(), {"--ignore-eos", "1"});
  if (!stop_token_ids.empty()) {
    std::string ids;
    for (int32_t t : stop_token_ids) ids += fmt::format("{}{}", ids.empty() ? "" : ",", t);
    a.insert(a.end(), {"--stop-token-ids", ids});
  }
  return a;
}

CompletionRequest parse_completion_request(const json& body, bool chat, const Tokenizer& tok,
                                           const ChatTemplate& chat_template,
                                           uint32_t context_length, uint64_t default_seed) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  check_fields(body, chat);
  CompletionRequest r;
  r.chat = chat;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string");
    r.model = body["model"].get<std::string>();
  }
  r.stream = bool_field(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : so->items()) {
      if (key != "include_usage") bad("stream_options", "unrecognized stream option '{}'", key);
      if (!value.is_boolean()) bad("stream_options", "'include_usage' must be a boolean");
      r.include_usage = value.get<bool>();
    }
  }
  if (bool_field(body, "echo").value_or(false))
    bad("echo", "'echo' is not supported by this server");

  if (chat) {
    auto it = body.find("messages");
    if (it == body.end()) bad("messages", "'messages' is required");
    r.prompt = chat_prompt_tokens(*it, tok, chat_template, /*add_generation_prompt=*/true);
  } else {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) bad("prompt", "'prompt' is required");
    const json* p = &*it;
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
      p = &(*p)[0];
    if (p->is_string())
      r.prompt = tok.encode(p->get<std::string>(), /*add_special=*/true, /*parse_special=*/false);
    else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer())
      r.prompt = tokens_of(*p, tok, "prompt");
    else if (p->is_array() && p->size() > 1)
      bad("prompt", "batched prompts are not supported: send one request per prompt");
    else
      bad("prompt", "'prompt' must be a string or an array of token ids");
  }
  const char* prompt_field = chat ? "messages" : "prompt";
  if (r.prompt.empty()) bad(prompt_field, "the prompt is empty");
  if (r.prompt.size() >= context_length)
    bad(prompt_field, "the prompt has {} tokens; this model's maximum context length is {} tokens",
        r.prompt.size(), context_length);
  const uint32_t room = context_length - static_cast<uint32_t>(r.prompt.size());

  const char* max_field = "max_completion_tokens";
  std::optional<uint32_t> max_tokens = number_field<uint32_t>(body, max_field, 1, 1e9);
  if (!max_tokens) max_tokens = number_field<uint32_t>(body, max_field = "max_tokens", 1, 1e9);
  r.max_tokens = max_tokens.value_or(chat ? room : 16);
  if (r.max_tokens > room)
    bad(max_field,
        "the prompt ({} tokens) plus max_tokens ({}) exceeds this model's maximum context length "
        "of {} tokens",
        r.prompt.size(), r.max_tokens, context_length);
  r.temperature = number_field<float>(body, "temperature", 0, 2).value_or(1.0f);
  r.top_p = number_field<float>(body, "top_p", 0, 1).value_or(1.0f);
  if (r.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  int64_t top_k = number_field<int64_t>(body, "top_k", -1, 1e9).value_or(0);
  r.top_k = top_k < 0 ? 0 : static_cast<uint32_t>(top_k);
  r.min_p = number_field<float>(body, "min_p", 0, 1).value_or(0.0f);
  auto seed = number_field<int64_t>(body, "seed", -9.2e18, 9.2e18);
  r.seed = seed ? static_cast<uint64_t>(*seed) : default_seed;
  r.n = number_field<uint32_t>(body, "n", 1, 16).value_or(1);
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string())
      r.stop.push_back(it->get<std::string>());
    else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else
      bad("stop", "'stop' must be a string or an array of strings");
    if (r.stop.size() > 16) bad("stop", "at most 16 stop strings");
    std::erase(r.stop, std::string());
  }
  if (chat) {
    r.logprobs = bool_field(body, "logprobs").value_or(false);
    r.top_logprobs = number_field<uint32_t>(body, "top_logprobs", 0, 20).value_or(0);
    if (r.top_logprobs > 0 && !r.logprobs)
      bad("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  } else if (auto lp = number_field<uint32_t>(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.top_logprobs = *lp;
  }

  r.presence_penalty = number_field<float>(body, "presence_penalty", -2, 2).value_or(0.0f);
  r.frequency_penalty = number_field<float>(body, "frequency_penalty", -2, 2).value_or(0.0f);
  r.repetition_penalty = number_field<float>(body, "repetition_penalty", 0, 1e9).value_or(1.0f);
  if (r.repetition_penalty <= 0)
    bad("repetition_penalty", "'repetition_penalty' must be greater than 0");
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      bad("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
    if (it->size() > 300) bad("logit_bias", "at most 300 entries in 'logit_bias'");
    for (const auto& [key, value] : it->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || key.empty())
        bad("logit_bias", "'logit_bias' key '{}' is not a token id", key);
      if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
        bad("logit_bias", "'logit_bias' token {} is outside the vocabulary of {} tokens", id,
            tok.vocab_size());
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
        bad("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
      r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  r.min_tokens = number_field<uint32_t>(body, "min_tokens", 0, 1e9).value_or(0);
  if (r.min_tokens > r.max_tokens)
    bad("min_tokens", "'min_tokens' ({}) is greater than max_tokens ({})", r.min_tokens,
        r.max_tokens);
  r.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    r.stop_token_ids = tokens_of(*it, tok, "stop_token_ids");
  }
  return r;
}

// ---------------------------------------------------------------- ChoiceText

ChoiceText::ChoiceText(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer, /*skip_special=*/true, /*at_text_start=*/false),
      stops_(std::move(stops)) {}

std::string ChoiceText::release(std::string s) {
  text_ += s;
  return s;
}

std::string ChoiceText::push(int32_t token) {
  if (stopped_) return "";
  held_ += decoder_.push(token);
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
  prompt_tokens_ = static_cast<uint32_t>(req_.prompt.size());
  for (uint32_t i = 0; i < req_.n; ++i) {
    choices_.push_back(Choice{ChoiceText(tok_, req_.stop), 0, "", json(), 0, false});
    if (req_.logprobs)
      choices_.back().logprobs = req_.chat ? json{{"content", json::array()}}
                                           : json{{"tokens", json::array()},
                                                  {"token_logprobs", json::array()},
                                                  {"top_logprobs", json::array()},
                                                  {"text_offset", json::array()}};
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
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

json CompletionSession::chunk(json choices) const {
  json c = {{"id", id_},
            {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", nullptr},
            {"choices", std::move(choices)}};
  if (req_.include_usage) c["usage"] = nullptr;
  return c;
}

json CompletionSession::choice_delta(uint32_t index, const std::string& text, const json* logprobs,
                                     const std::string& finish_reason) {
  Choice& c = choices_[index];
  json fr = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  json lp = logprobs ? *logprobs : json(nullptr);
  if (req_.chat) {
    json delta = json::object();
    if (!c.sent_role) {
      delta["role"] = "assistant";
      c.sent_role = true;
    }
    if (!text.empty() || finish_reason.empty()) delta["content"] = text;
    return {{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", fr}};
  }
  return {{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", fr}};
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
    prompt_tokens_ = u->prompt_tokens;
    cached_tokens_ = u->cached_tokens;
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
    ++c.tokens;
    std::string delta = c.text.push(token);
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
    for (unsigned char ch : delta) c.text_offset += (ch & 0xC0) != 0x80;
    if (c.text.stopped()) c.finish_reason = "stop";
    if (req_.stream && (!delta.empty() || req_.logprobs || !c.sent_role))
      out.push_back(chunk(
          json::array({choice_delta(index, delta, req_.logprobs ? &lp_delta : nullptr, "")})));
    if (req_.stream && !c.finish_reason.empty())
      out.push_back(chunk(json::array({choice_delta(index, "", nullptr, c.finish_reason)})));
    return out;
  }
  const auto& end = std::get<proto::EndMessage>(msg);
  if (!c.finish_reason.empty()) return out;
  std::string rest = c.text.finish();
  c.finish_reason = proto::finish_reason_name(end.reason);
  if (req_.stream) {
    if (!rest.empty()) out.push_back(chunk(json::array({choice_delta(index, rest, nullptr, "")})));
    out.push_back(chunk(json::array({choice_delta(index, "", nullptr, c.finish_reason)})));
  }
  return out;
}

std::vector<json> CompletionSession::finish() {
  std::vector<json> out;
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    if (!c.finish_reason.empty()) continue;
    std::string rest = c.text.finish();
    c.finish_reason = c.tokens >= req_.max_tokens ? "length" : "stop";
    if (req_.stream) {
      if (!rest.empty()) out.push_back(chunk(json::array({choice_delta(i, rest, nullptr, "")})));
      out.push_back(chunk(json::array({choice_delta(i, "", nullptr, c.finish_reason)})));
    }
  }
  if (req_.stream && req_.include_usage) {
    json u = chunk(json::array());
    u["usage"] = usage();
    out.push_back(std::move(u));
  }
  return out;
}

json CompletionSession::response() const {
  json choices = json::array();
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json lp = req_.logprobs ? c.logprobs : json(nullptr);
    if (req_.chat)
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", c.text.text()}}},
                         {"logprobs", lp},
                         {"finish_reason", c.finish_reason}});
    else
      choices.push_back({{"index", i},
                         {"text", c.text.text()},
                         {"logprobs", lp},
                         {"finish_reason", c.finish_reason}});
  }
  return {{"id", id_},
          {"object", req_.chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", nullptr},
          {"choices", std::move(choices)},
          {"usage", usage()}};
}

}  // namespace pith::server
