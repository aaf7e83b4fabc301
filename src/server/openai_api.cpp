#include "server/openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat_template/chat_template.h"
#include "common/error.h"
#include "server/legacy_functions.h"
#include "server/response_format.h"

namespace pith::server {

using nlohmann::json;

std::optional<bool> bool_field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) refuse_request(key, "'{}' must be a boolean", key);
  return it->get<bool>();
}

namespace {

// Reads an optional number field with a range check.
template <typename T>
std::optional<T> number_field(const json& body, const char* key, double lo, double hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) refuse_request(key, "'{}' must be a number", key);
  double v = it->get<double>();
  if (std::is_integral_v<T> && v != std::floor(v))
    refuse_request(key, "'{}' must be an integer", key);
  if (!(v >= lo && v <= hi))
    refuse_request(key, "'{}' must be between {} and {}, got {}", key, lo, hi, v);
  return static_cast<T>(v);
}

int32_t token_id(const json& v, const Tokenizer& tok, const char* param) {
  if (!v.is_number_integer()) refuse_request(param, "'{}' must hold integer token ids", param);
  int64_t id = v.get<int64_t>();
  if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
    refuse_request(param, "token {} in '{}' is outside the vocabulary of {} tokens", id, param,
                   tok.vocab_size());
  return static_cast<int32_t>(id);
}

std::vector<int32_t> tokens_of(const json& arr, const Tokenizer& tok, const char* param) {
  std::vector<int32_t> out;
  for (const auto& v : arr) out.push_back(token_id(v, tok, param));
  return out;
}

// A predicted output's text ({"type": "content", "content": text or text parts}); at most a
// context's worth of tokens.
std::string prediction_text(const json& p, const Tokenizer& tok, uint32_t context_length) {
  if (!p.is_object()) refuse_request("prediction", "'prediction' must be an object");
  for (const auto& [key, value] : p.items())
    if (key != "type" && key != "content")
      refuse_request("prediction", "unrecognized field '{}' in 'prediction'", key);
  if (string_or(p, "type") != "content")
    refuse_request("prediction", "'prediction.type' must be \"content\"");
  auto it = p.find("content");
  if (it == p.end() || !(it->is_string() || it->is_array()))
    refuse_request("prediction", "'prediction.content' must be a string or an array of text parts");
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else {
    for (const auto& part : *it) {
      if (!part.is_object() || string_or(part, "type") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        refuse_request("prediction",
                       "'prediction.content' parts must be {{\"type\": \"text\", \"text\": ...}}");
      text += part["text"].get<std::string>();
    }
  }
  if (text.find('\0') != std::string::npos)
    refuse_request("prediction", "'prediction.content' may not contain NUL characters");
  const size_t tokens = tok.encode(text, /*add_special=*/false, /*parse_special=*/false).size();
  if (tokens > context_length)
    refuse_request("prediction", "the prediction has {} tokens; this model's context is {} tokens",
                   tokens, context_length);
  return text;
}

}  // namespace

std::string message_text(const json& m) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // content parts: only text is supported by a text-only model
    std::string out;
    for (const auto& part : *it) {
      if (!part.is_object() || string_or(part, "type") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        refuse_request("messages", "only text content parts are supported by this model");
      out += part["text"].get<std::string>();
    }
    return out;
  }
  refuse_request("messages", "message 'content' must be a string or an array of text parts");
}

namespace {

// Every request field, and what this server does with it. Fields that do not change the output
// are accepted; fields whose feature is missing are refused by name; unknown ones too (a client
// must never believe that a field it sent took effect when it did not).
// AtDefault: an SGLang/vLLM extension field that LLM routers (sglang-router, vllm-router) fill in
// on every request they forward; accepted at the value that is this server's behaviour anyway.
enum class Field { Used, Accepted, Unsupported, AtDefault };
struct FieldRule {
  const char* name;
  Field what;
  bool chat, completions;
  bool default_value = false;          // AtDefault: the only value accepted
  const char* default_json = nullptr;  // AtDefault for a non-boolean field: that value as JSON
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
    {"echo", Field::Used, false, true},
    {"return_token_ids", Field::Used, true, true},
    // No effect on the output: annotations and storage/routing hints of OpenAI's platform.
    {"user", Field::Accepted, true, true},
    {"metadata", Field::Accepted, true, true},
    {"store", Field::Accepted, true, true},
    {"service_tier", Field::Accepted, true, true},
    {"safety_identifier", Field::Accepted, true, true},
    {"prompt_cache_key", Field::Accepted, true, true},  // the prefix cache is always on
    // Features this server does not have (yet).
    {"tools", Field::Used, true, false},
    {"tool_choice", Field::Used, true, false},
    {"parallel_tool_calls", Field::Used, true, false},
    {"functions", Field::Used, true, false},  // legacy_functions.h: rewritten as tools
    {"function_call", Field::Used, true, false},
    {"response_format", Field::Used, true, false},
    {"audio", Field::Unsupported, true, false},
    // Output modalities: text only, so ["text"] (the default) is what this server does.
    {"modalities", Field::AtDefault, true, false, false, R"(["text"])"},
    {"prediction", Field::Used, true, true},
    {"reasoning_effort", Field::Used, true, false},
    {"chat_template_kwargs", Field::Used, true, false},
    // GPT-5's answer length; "medium" (the default) leaves the model's output as it is.
    {"verbosity", Field::AtDefault, true, false, false, R"("medium")"},
    {"web_search_options", Field::Unsupported, true, false},
    {"suffix", Field::Used, false, true},
    {"best_of", Field::Used, false, true},
    // Extensions routers send with their defaults: stop strings are trimmed from the text,
    // special tokens are left out of it, no hidden states, the generation prompt opens a new
    // assistant turn, reasoning is told apart from the answer and streamed as it comes.
    {"no_stop_trim", Field::AtDefault, true, true, false},
    {"skip_special_tokens", Field::AtDefault, true, true, true},
    {"return_hidden_states", Field::AtDefault, true, true, false},
    {"continue_final_message", Field::AtDefault, true, false, false},
    {"separate_reasoning", Field::AtDefault, true, false, true},
    {"stream_reasoning", Field::AtDefault, true, false, true},
    {"include_reasoning", Field::AtDefault, true, false, true},
};

void check_fields(const json& body, bool chat) {
  for (const auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const auto& f : kFields)
      if (key == f.name) rule = &f;
    const bool applies = rule && (chat ? rule->chat : rule->completions);
    if (!applies)
      refuse_request(key, "unrecognized request argument '{}' for {}", key,
                     chat ? "/v1/chat/completions" : "/v1/completions");
    if (rule->what == Field::Unsupported && !value.is_null())
      refuse_request(key, "'{}' is not supported by this server", key);
    if (rule->what == Field::AtDefault && !value.is_null() && rule->default_json) {
      if (value != json::parse(rule->default_json))
        refuse_request(key, "'{}': {} is not supported by this server (only {})", key, value.dump(),
                       rule->default_json);
    } else if (rule->what == Field::AtDefault && !value.is_null()) {
      if (!value.is_boolean()) refuse_request(key, "'{}' must be a boolean", key);
      if (value.get<bool>() != rule->default_value)
        refuse_request(key, "'{}': {} is not supported by this server (only {})", key,
                       value.get<bool>(), rule->default_value);
    }
  }
}

// The text after the insertion point of a fill-in-the-middle completion, or nullopt for a plain
// one: a model without FIM markers cannot fill in before a text (an empty suffix asks for
// nothing after the prompt, which a plain completion is).
std::optional<std::string> fim_suffix(const json& body, const Tokenizer& tok) {
  auto it = body.find("suffix");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) refuse_request("suffix", "'suffix' must be a string");
  const Vocab& v = tok.vocab();
  if (v.fim_pre_id < 0) {
    if (it->get<std::string>().empty()) return std::nullopt;
    refuse_request("suffix",
                   "'suffix' needs a model with fill-in-the-middle tokens (such as <|fim_prefix|>, "
                   "<|fim_suffix|> and <|fim_middle|>); this model has none");
  }
  if (bool_field(body, "echo").value_or(false))
    refuse_request("echo", "'echo' cannot be combined with 'suffix'");
  return it->get<std::string>();
}

// A fill-in-the-middle prompt in the prefix-suffix-middle order code models are trained on:
// [BOS] <PRE> prefix <SUF> suffix <MID>, the model writing the middle next. Each text is
// tokenized on its own (a SentencePiece vocabulary's space prefix on each, as llama.cpp's
// /infill does); token-id prefixes are taken as sent.
std::vector<int32_t> fim_prompt(const Tokenizer& tok, std::vector<int32_t> prefix,
                                const std::string& suffix) {
  const Vocab& v = tok.vocab();
  std::vector<int32_t> ids;
  if (tok.add_bos()) ids.push_back(tok.bos_id());
  ids.push_back(v.fim_pre_id);
  ids.insert(ids.end(), prefix.begin(), prefix.end());
  ids.push_back(v.fim_suf_id);
  for (int32_t id : tok.encode(suffix, /*add_special=*/false, /*parse_special=*/false))
    ids.push_back(id);
  ids.push_back(v.fim_mid_id);
  return ids;
}

// chat_template_kwargs, with reasoning_effort turned into the template's thinking switch as vLLM
// turns it: enable_thinking (false only for "none") and reasoning_effort itself (for templates
// that grade the effort), unless chat_template_kwargs sets them. A template that reads neither
// cannot act on the field: a 400, as OpenAI answers it for models that do not reason.
json template_kwargs(const json& body, const ChatTemplate& chat_template) {
  json kwargs = nullptr;
  if (auto it = body.find("chat_template_kwargs"); it != body.end()) kwargs = *it;
  auto effort = body.find("reasoning_effort");
  if (effort == body.end() || effort->is_null()) return kwargs;
  static constexpr std::string_view kEfforts[] = {"none", "minimal", "low", "medium",
                                                  "high", "xhigh",   "max"};
  if (!effort->is_string() || std::find(std::begin(kEfforts), std::end(kEfforts),
                                        effort->get<std::string>()) == std::end(kEfforts))
    refuse_request(
        "reasoning_effort",
        "'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max");
  const std::string& source = chat_template.source();
  if (source.find("enable_thinking") == std::string::npos &&
      source.find("reasoning_effort") == std::string::npos)
    refuse_request(
        "reasoning_effort",
        "'reasoning_effort' is not supported by this model: its chat template has no reasoning "
        "switch (it reads neither enable_thinking nor reasoning_effort)");
  if (kwargs.is_null()) kwargs = json::object();
  if (!kwargs.is_object()) return kwargs;  // chat_prompt_tokens refuses it by name
  if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = *effort != "none";
  if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
  // gpt-oss was trained on three efforts (its system message says "Reasoning: low" and so on)
  // and always reasons: the others map onto the nearest.
  if (is_harmony_template(source) && kwargs["reasoning_effort"].is_string()) {
    const std::string e = kwargs["reasoning_effort"];
    if (e == "none" || e == "minimal") kwargs["reasoning_effort"] = "low";
    if (e == "xhigh" || e == "max") kwargs["reasoning_effort"] = "high";
  }
  return kwargs;
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const json& messages_field, const Tokenizer& tok,
                                        const ChatTemplate& chat_template,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json* tools,
                                        const json* template_kwargs, std::string* rendered) {
  if (!messages_field.is_array() || messages_field.empty())
    refuse_request("messages", "'messages' must be a non-empty array");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const auto& m : messages_field) messages.push_back(template_message(m));
  if (gemma4_needs_tool_turns(chat_template.source())) messages = gemma4_tool_turns(messages);
  if (is_harmony_template(chat_template.source())) messages = harmony_turns(messages);
  nlohmann::ordered_json vars = {{"messages", messages},
                                 {"add_generation_prompt", add_generation_prompt}};
  if (tools && !tools->is_null()) vars["tools"] = *tools;
  // gpt-oss's template writes every function's description, which OpenAI makes optional.
  if (vars.contains("tools") && is_harmony_template(chat_template.source()))
    for (auto& tool : vars["tools"])
      if (tool.contains("function") && !tool["function"].contains("description"))
        tool["function"]["description"] = "";
  if (!tok.bos_text().empty()) vars["bos_token"] = tok.bos_text();
  if (!tok.eos_text().empty()) vars["eos_token"] = tok.eos_text();
  if (template_kwargs && !template_kwargs->is_null()) {
    if (!template_kwargs->is_object())
      refuse_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [key, value] : template_kwargs->items())
      if (vars.contains(key) || key == "tools" || key == "documents")
        refuse_request("chat_template_kwargs", "'chat_template_kwargs' may not set '{}'", key);
    vars["extra_context"] = *template_kwargs;
  }
  std::string text;
  try {
    text = chat_template.render(ChatTemplate::variables_for(vars));
  } catch (const std::exception& e) {
    refuse_request("messages", "chat template: {}", e.what());
  }
  if (rendered) *rendered = text;
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
}

std::vector<std::string> CompletionRequest::inferlet_args() const {
  std::vector<std::string> a;
  for (const auto& prompt : prompts) {
    std::string ids;
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (i) ids += ',';
      ids += std::to_string(prompt[i]);
    }
    a.insert(a.end(), {"--tokens", ids});
  }
  if (echo && logprobs) a.insert(a.end(), {"--prompt-logprobs", "1"});
  a.insert(a.end(), {"--max-tokens", std::to_string(max_tokens), "--temperature",
                     fmt::format("{}", temperature), "--top-p", fmt::format("{}", top_p), "--top-k",
                     std::to_string(top_k), "--min-p", fmt::format("{}", min_p), "--seed",
                     std::to_string(seed), "--n", std::to_string(n)});
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
  if (!grammar.empty()) a.insert(a.end(), {"--grammar", grammar});
  if (!adapter.empty()) a.insert(a.end(), {"--adapter", adapter});
  if (!prediction.empty()) a.insert(a.end(), {"--prediction", prediction});
  if (!stop_token_ids.empty()) {
    std::string ids;
    for (int32_t t : stop_token_ids) ids += fmt::format("{}{}", ids.empty() ? "" : ",", t);
    a.insert(a.end(), {"--stop-token-ids", ids});
  }
  return a;
}

CompletionRequest parse_completion_request(const json& body, bool chat, const Tokenizer& tok,
                                           const ChatTemplate& chat_template,
                                           uint32_t context_length, uint64_t default_seed,
                                           const nlohmann::ordered_json* ordered_body,
                                           ToolCallFormat tool_format) {
  if (!body.is_object()) refuse_request("", "the request body must be a JSON object");
  if (chat && uses_legacy_functions(body)) {
    json modern = body;
    nlohmann::ordered_json modern_ordered =
        ordered_body && ordered_body->is_object() ? *ordered_body : nlohmann::ordered_json(body);
    legacy_functions_as_tools(modern, modern_ordered);
    const bool functions = body.contains("functions") && !body["functions"].is_null();
    try {
      CompletionRequest r =
          parse_completion_request(modern, chat, tok, chat_template, context_length, default_seed,
                                   &modern_ordered, tool_format);
      r.legacy_functions = functions;
      return r;
    } catch (const InvalidRequest& e) {
      // What tool calling found wrong, named as the client wrote it.
      if (!functions || (e.param() != "tools" && e.param() != "tool_choice")) throw;
      std::string message = e.what();
      for (auto [modern_name, legacy_name] :
           {std::pair{"'tools'", "'functions'"}, std::pair{"'tool_choice'", "'function_call'"}})
        for (size_t at; (at = message.find(modern_name)) != std::string::npos;)
          message.replace(at, std::string_view(modern_name).size(), legacy_name);
      throw InvalidRequest(e.param() == "tools" ? "functions" : "function_call", message);
    }
  }
  check_fields(body, chat);
  CompletionRequest r;
  r.chat = chat;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) refuse_request("model", "'model' must be a string");
    r.model = body["model"].get<std::string>();
  }
  r.stream = bool_field(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) refuse_request("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : so->items()) {
      if (key != "include_usage")
        refuse_request("stream_options", "unrecognized stream option '{}'", key);
      if (!value.is_boolean())
        refuse_request("stream_options", "'include_usage' must be a boolean");
      r.include_usage = value.get<bool>();
    }
  }
  r.echo = bool_field(body, "echo").value_or(false);
  r.return_token_ids = bool_field(body, "return_token_ids").value_or(false);

  if (chat) {
    auto it = body.find("messages");
    if (it == body.end()) refuse_request("messages", "'messages' is required");
    r.tools = parse_tool_request(
        body, ordered_body && ordered_body->is_object() ? ordered_body : nullptr);
    r.tool_format = tool_format;
    // The template sees the tools unless tool_choice is none (then the model is not told).
    const json kwargs = template_kwargs(body, chat_template);
    // Mistral's templates read back only 9-character call ids: others are mapped onto such.
    json mistral_messages;
    const json* messages = &*it;
    if (tool_format == ToolCallFormat::Mistral)
      messages = &(mistral_messages = mistral_tool_call_ids(*it));
    std::string rendered;
    r.prompts.push_back(chat_prompt_tokens(*messages, tok, chat_template,
                                           /*add_generation_prompt=*/true,
                                           r.tools.active() ? &r.tools.template_tools : nullptr,
                                           &kwargs, &rendered));
    r.prompt_opens_thought = prompt_opens_thought(rendered);
  } else {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) refuse_request("prompt", "'prompt' is required");
    const std::optional<std::string> suffix = fim_suffix(body, tok);
    // A string, token ids, or a batch of either (one set of n choices per prompt); with a
    // suffix, each prompt is the text before the insertion point.
    auto one = [&](const json& p) {
      if (p.is_string()) {
        const std::string& text = p.get_ref<const std::string&>();
        r.prompts.push_back(suffix ? fim_prompt(tok, tok.encode(text, false, false), *suffix)
                                   : tok.encode(text, /*add_special=*/true,
                                                /*parse_special=*/false));
        r.echo_texts.push_back(text);
      } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
        r.prompts.push_back(tokens_of(p, tok, "prompt"));
        r.echo_texts.push_back(tok.decode(r.prompts.back()));
        if (suffix) r.prompts.back() = fim_prompt(tok, std::move(r.prompts.back()), *suffix);
      } else {
        refuse_request("prompt", "'prompt' must be a string, token ids, or an array of either");
      }
    };
    const json& p = *it;
    if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
      if (p.size() > 64) refuse_request("prompt", "at most 64 prompts in one request");
      for (const auto& each : p) one(each);
    } else {
      one(p);
    }
  }
  const char* prompt_field = chat ? "messages" : "prompt";
  size_t longest = 0;
  for (const auto& prompt : r.prompts) {
    if (prompt.empty()) refuse_request(prompt_field, "the prompt is empty");
    if (prompt.size() >= context_length)
      refuse_request(prompt_field,
                     "the prompt has {} tokens; this model's maximum context length is {} tokens",
                     prompt.size(), context_length);
    longest = std::max(longest, prompt.size());
  }
  const uint32_t room = context_length - static_cast<uint32_t>(longest);

  // max_tokens 0 scores a text without generating (echo with logprobs).
  const double least = r.echo ? 0 : 1;
  const char* max_field = "max_completion_tokens";
  std::optional<uint32_t> max_tokens = number_field<uint32_t>(body, max_field, least, 1e9);
  if (!max_tokens) max_tokens = number_field<uint32_t>(body, max_field = "max_tokens", least, 1e9);
  r.max_tokens = max_tokens.value_or(chat ? room : 16);
  if (r.max_tokens > room)
    refuse_request(
        max_field,
        "the prompt ({} tokens) plus max_tokens ({}) exceeds this model's maximum context length "
        "of {} tokens",
        longest, r.max_tokens, context_length);
  r.temperature = number_field<float>(body, "temperature", 0, 2).value_or(1.0f);
  r.top_p = number_field<float>(body, "top_p", 0, 1).value_or(1.0f);
  if (r.top_p <= 0) refuse_request("top_p", "'top_p' must be greater than 0");
  int64_t top_k = number_field<int64_t>(body, "top_k", -1, 1e9).value_or(0);
  r.top_k = top_k < 0 ? 0 : static_cast<uint32_t>(top_k);
  r.min_p = number_field<float>(body, "min_p", 0, 1).value_or(0.0f);
  auto seed = number_field<int64_t>(body, "seed", -9.2e18, 9.2e18);
  r.seed = seed ? static_cast<uint64_t>(*seed) : default_seed;
  r.n = number_field<uint32_t>(body, "n", 1, 16).value_or(1);
  // best_of: that many candidates per prompt, the n with the highest log-probability per token
  // returned (so the whole set must be seen before anything is sent).
  if (auto best_of = number_field<uint32_t>(body, "best_of", 1, 16); best_of && *best_of != r.n) {
    if (*best_of < r.n)
      refuse_request("best_of", "'best_of' ({}) must be at least n ({})", *best_of, r.n);
    if (r.stream) refuse_request("best_of", "'best_of' results cannot be streamed");
    r.returned_n = r.n;
    r.n = *best_of;
  }
  if (r.n * r.prompts.size() > 64)
    refuse_request(r.returned_n ? "best_of" : "n",
                   "{} prompts with {} = {} make {} choices; at most 64", r.prompts.size(),
                   r.returned_n ? "best_of" : "n", r.n, r.n * r.prompts.size());
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string())
      r.stop.push_back(it->get<std::string>());
    else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string())
          refuse_request("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else
      refuse_request("stop", "'stop' must be a string or an array of strings");
    if (r.stop.size() > 16) refuse_request("stop", "at most 16 stop strings");
    std::erase(r.stop, std::string());
  }
  if (chat) {
    r.logprobs = bool_field(body, "logprobs").value_or(false);
    r.top_logprobs = number_field<uint32_t>(body, "top_logprobs", 0, 20).value_or(0);
    if (r.top_logprobs > 0 && !r.logprobs)
      refuse_request("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  } else if (auto lp = number_field<uint32_t>(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.top_logprobs = *lp;
  }

  r.presence_penalty = number_field<float>(body, "presence_penalty", -2, 2).value_or(0.0f);
  r.frequency_penalty = number_field<float>(body, "frequency_penalty", -2, 2).value_or(0.0f);
  r.repetition_penalty = number_field<float>(body, "repetition_penalty", 0, 1e9).value_or(1.0f);
  if (r.repetition_penalty <= 0)
    refuse_request("repetition_penalty", "'repetition_penalty' must be greater than 0");
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      refuse_request("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
    if (it->size() > 300) refuse_request("logit_bias", "at most 300 entries in 'logit_bias'");
    for (const auto& [key, value] : it->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || key.empty())
        refuse_request("logit_bias", "'logit_bias' key '{}' is not a token id", key);
      if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
        refuse_request("logit_bias", "'logit_bias' token {} is outside the vocabulary of {} tokens",
                       id, tok.vocab_size());
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
        refuse_request("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
      r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  r.min_tokens = number_field<uint32_t>(body, "min_tokens", 0, 1e9).value_or(0);
  if (r.min_tokens > r.max_tokens)
    refuse_request("min_tokens", "'min_tokens' ({}) is greater than max_tokens ({})", r.min_tokens,
                   r.max_tokens);
  r.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array())
      refuse_request("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    r.stop_token_ids = tokens_of(*it, tok, "stop_token_ids");
  }
  if (auto it = body.find("response_format"); chat && it != body.end()) {
    const nlohmann::ordered_json* ordered = nullptr;
    if (ordered_body && ordered_body->is_object())
      if (auto o = ordered_body->find("response_format"); o != ordered_body->end()) ordered = &*o;
    r.grammar = response_format_grammar(*it, ordered);
    // gpt-oss writes its answer as the final message, after its header (and any thought).
    if (!r.grammar.empty() && is_harmony_template(chat_template.source()))
      r.grammar = harmony_answer_grammar(std::move(r.grammar));
  }
  if (auto it = body.find("prediction"); it != body.end() && !it->is_null())
    r.prediction = prediction_text(*it, tok, context_length);
  if (r.tools.forced()) {
    if (!r.grammar.empty())
      refuse_request("response_format",
                     "'response_format' cannot be combined with a forced tool_choice");
    r.grammar = tool_call_grammar(r.tools, r.tool_format);
  }
  return r;
}

}  // namespace pith::server
