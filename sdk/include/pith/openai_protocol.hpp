// pith/openai_protocol.hpp: the messages between the built-in openai_completion inferlet
// (inferlets/openai_completion) and `pith serve`'s OpenAI endpoints (src/server/openai_routes.cpp).
// Both sides include this header, so the wire format is written down once: the inferlet encodes
// with encode(), the server decodes with parse(). One message per pith::send, plain text:
//
//   usage <prompt_tokens> <cached_tokens>                  (one per prompt; they add up)
//   ptok <prompt> <token> <logprob|none> [<id>:<logprob>,...] (echo: a prompt token's logprob)
//   tok <choice> <token> <logprob> [<id>:<logprob>,...]   (alternatives only when asked for)
//   pred <choice> <accepted> <rejected>                  (a predicted output's draft verified)
//   end <choice> <stop|length> <completion_tokens>
//   error <code> <text>                                    (code: a pith_status_t, see abi.h)
//
// A failure carries the ABI status that caused it, so the server chooses the HTTP status from
// the code (out of KV pages: 503) and never from the wording of the text.
// Header-only, no exceptions (inferlets build with -fno-exceptions): parse() reports what is
// malformed through its `error` argument.
#pragma once

#include <math.h>
#include <pith/abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pith::openai_protocol {

enum class FinishReason : uint8_t { Stop, Length };

struct UsageMessage {
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // of the prompt, served by the prefix cache
};

struct TokenAlternative {
  int32_t token = 0;
  double logprob = 0;
};

struct TokenMessage {
  uint32_t choice = 0;
  int32_t token = 0;
  double logprob = 0;
  std::vector<TokenAlternative> top;  // most likely first; empty unless logprobs were asked for
};

// A prompt token and the model's log-probability of it given the tokens before (none for the
// first), for `echo` with logprobs; `prompt` indexes the request's prompts.
struct PromptTokenMessage {
  uint32_t prompt = 0;
  int32_t token = 0;
  bool has_logprob = false;
  double logprob = 0;
  std::vector<TokenAlternative> top;
};

// One verified draft of a predicted output: how many of its tokens the completion took and how
// many it rejected; sent before the step's tok messages. The server sums them for usage.
struct PredictionMessage {
  uint32_t choice = 0;
  uint32_t accepted = 0;
  uint32_t rejected = 0;
};

struct EndMessage {
  uint32_t choice = 0;
  FinishReason reason = FinishReason::Stop;
  uint32_t completion_tokens = 0;
};

struct ErrorMessage {
  pith_status_t code = PITH_ERR_INTERNAL;
  std::string text;
};

using Message = std::variant<UsageMessage, TokenMessage, PromptTokenMessage, PredictionMessage,
                             EndMessage, ErrorMessage>;

inline const char* finish_reason_name(FinishReason r) {
  return r == FinishReason::Length ? "length" : "stop";
}

// Logprobs travel with 6 significant digits; a non-finite one (probability 0) as -9999.
inline std::string encode_logprob(double x) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.6g", isfinite(x) ? x : -9999.0);
  return buf;
}

inline std::string encode(const UsageMessage& m) {
  return "usage " + std::to_string(m.prompt_tokens) + " " + std::to_string(m.cached_tokens);
}

inline std::string encode(const TokenMessage& m) {
  std::string s = "tok " + std::to_string(m.choice) + " " + std::to_string(m.token) + " " +
                  encode_logprob(m.logprob);
  for (size_t i = 0; i < m.top.size(); ++i) {
    s += i == 0 ? " " : ",";
    s += std::to_string(m.top[i].token) + ":" + encode_logprob(m.top[i].logprob);
  }
  return s;
}

inline std::string encode(const PromptTokenMessage& m) {
  std::string s = "ptok " + std::to_string(m.prompt) + " " + std::to_string(m.token) + " " +
                  (m.has_logprob ? encode_logprob(m.logprob) : std::string("none"));
  for (size_t i = 0; i < m.top.size(); ++i) {
    s += i == 0 ? " " : ",";
    s += std::to_string(m.top[i].token) + ":" + encode_logprob(m.top[i].logprob);
  }
  return s;
}

inline std::string encode(const PredictionMessage& m) {
  return "pred " + std::to_string(m.choice) + " " + std::to_string(m.accepted) + " " +
         std::to_string(m.rejected);
}

inline std::string encode(const EndMessage& m) {
  return "end " + std::to_string(m.choice) + " " + finish_reason_name(m.reason) + " " +
         std::to_string(m.completion_tokens);
}

inline std::string encode(const ErrorMessage& m) {
  return "error " + std::to_string(static_cast<int>(m.code)) + " " + m.text;
}

inline std::string encode(const Message& m) {
  return std::visit([](const auto& v) { return encode(v); }, m);
}

namespace detail {

// Splits off the next space-separated word (leading spaces skipped).
inline std::string_view next_word(std::string_view& rest) {
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t sp = rest.find(' ');
  std::string_view w = rest.substr(0, sp);
  rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
  return w;
}

// Decimal digits only, optionally after '-' when `allow_negative`; no overflow past `max`.
inline bool parse_int(std::string_view w, int64_t max, bool allow_negative, int64_t& out) {
  bool negative = false;
  if (allow_negative && !w.empty() && w.front() == '-') {
    negative = true;
    w.remove_prefix(1);
  }
  if (w.empty() || w.size() > 19) return false;
  int64_t v = 0;
  for (char c : w) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
    if (v > max) return false;
  }
  out = negative ? -v : v;
  return true;
}

inline bool parse_u32(std::string_view w, uint32_t& out) {
  int64_t v = 0;
  if (!parse_int(w, UINT32_MAX, false, v)) return false;
  out = static_cast<uint32_t>(v);
  return true;
}

inline bool parse_i32(std::string_view w, int32_t& out) {
  int64_t v = 0;
  if (!parse_int(w, INT32_MAX, true, v)) return false;
  out = static_cast<int32_t>(v);
  return true;
}

inline bool parse_double(std::string_view w, double& out) {
  if (w.empty() || w.size() > 40) return false;
  std::string s(w);
  char* end = nullptr;
  out = strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && isfinite(out);
}

inline bool malformed(std::string& error, std::string_view what, std::string_view word) {
  error = std::string(what) + " '" + std::string(word) + "'";
  return false;
}

// The optional last word "<id>:<logprob>,..." of tok / ptok, and nothing after it.
inline bool parse_alternatives(std::string_view rest, std::string_view text, const char* kind,
                               std::vector<TokenAlternative>& top, std::string& error) {
  std::string_view alts = next_word(rest);
  if (!next_word(rest).empty())
    return malformed(error, std::string(kind) + ": trailing text in", text);
  while (!alts.empty()) {
    size_t comma = alts.find(',');
    std::string_view a = alts.substr(0, comma);
    size_t colon = a.find(':');
    TokenAlternative alt;
    if (colon == std::string_view::npos || !parse_i32(a.substr(0, colon), alt.token) ||
        !parse_double(a.substr(colon + 1), alt.logprob))
      return malformed(error, std::string(kind) + ": bad alternative", a);
    top.push_back(alt);
    alts = comma == std::string_view::npos ? std::string_view() : alts.substr(comma + 1);
  }
  return true;
}

}  // namespace detail

// Parses one message into `out`. Returns false with `error` naming what is wrong (unknown
// kind, a missing or malformed field, trailing words); `out` is then unspecified.
inline bool parse(std::string_view text, Message& out, std::string& error) {
  using detail::malformed;
  using detail::next_word;
  std::string_view rest = text;
  std::string_view kind = next_word(rest);
  if (kind == "usage") {
    UsageMessage m;
    std::string_view a = next_word(rest), b = next_word(rest);
    if (!detail::parse_u32(a, m.prompt_tokens))
      return malformed(error, "usage: bad prompt_tokens", a);
    if (!detail::parse_u32(b, m.cached_tokens))
      return malformed(error, "usage: bad cached_tokens", b);
    if (!next_word(rest).empty()) return malformed(error, "usage: trailing text in", text);
    out = m;
    return true;
  }
  if (kind == "tok") {
    TokenMessage m;
    std::string_view c = next_word(rest), t = next_word(rest), lp = next_word(rest);
    if (!detail::parse_u32(c, m.choice)) return malformed(error, "tok: bad choice", c);
    if (!detail::parse_i32(t, m.token)) return malformed(error, "tok: bad token", t);
    if (!detail::parse_double(lp, m.logprob)) return malformed(error, "tok: bad logprob", lp);
    if (!detail::parse_alternatives(rest, text, "tok", m.top, error)) return false;
    out = std::move(m);
    return true;
  }
  if (kind == "ptok") {
    PromptTokenMessage m;
    std::string_view p = next_word(rest), t = next_word(rest), lp = next_word(rest);
    if (!detail::parse_u32(p, m.prompt)) return malformed(error, "ptok: bad prompt", p);
    if (!detail::parse_i32(t, m.token)) return malformed(error, "ptok: bad token", t);
    m.has_logprob = lp != "none";
    if (m.has_logprob && !detail::parse_double(lp, m.logprob))
      return malformed(error, "ptok: bad logprob", lp);
    if (!detail::parse_alternatives(rest, text, "ptok", m.top, error)) return false;
    out = std::move(m);
    return true;
  }
  if (kind == "pred") {
    PredictionMessage m;
    std::string_view c = next_word(rest), a = next_word(rest), r = next_word(rest);
    if (!detail::parse_u32(c, m.choice)) return malformed(error, "pred: bad choice", c);
    if (!detail::parse_u32(a, m.accepted)) return malformed(error, "pred: bad accepted", a);
    if (!detail::parse_u32(r, m.rejected)) return malformed(error, "pred: bad rejected", r);
    if (!next_word(rest).empty()) return malformed(error, "pred: trailing text in", text);
    out = m;
    return true;
  }
  if (kind == "end") {
    EndMessage m;
    std::string_view c = next_word(rest), r = next_word(rest), n = next_word(rest);
    if (!detail::parse_u32(c, m.choice)) return malformed(error, "end: bad choice", c);
    if (r == "stop")
      m.reason = FinishReason::Stop;
    else if (r == "length")
      m.reason = FinishReason::Length;
    else
      return malformed(error, "end: bad finish reason", r);
    if (!detail::parse_u32(n, m.completion_tokens))
      return malformed(error, "end: bad completion_tokens", n);
    if (!next_word(rest).empty()) return malformed(error, "end: trailing text in", text);
    out = m;
    return true;
  }
  if (kind == "error") {
    ErrorMessage m;
    std::string_view c = next_word(rest);
    uint32_t code = 0;
    if (!detail::parse_u32(c, code) || code == PITH_OK || code > 0xffff)
      return malformed(error, "error: bad status code", c);
    m.code = static_cast<pith_status_t>(code);
    m.text = std::string(rest);
    out = std::move(m);
    return true;
  }
  return malformed(error, "unknown message kind", kind);
}

}  // namespace pith::openai_protocol
