// output_validation: ranks candidate strings by their likelihood under the model after a
// prompt, ReLM-style (Kuchnik et al. 2023): validation as a query over the model's
// distribution instead of free generation. The prompt is prefilled once; every candidate
// forks that context (sharing the prompt's KV pages) and is scored in ONE forward that returns
// the full-vocabulary distribution after each of its tokens (Context::decode_all with
// PITH_TOP_K_ALL): log p(candidate | prompt) = sum of its tokens' log-probabilities.
// --stepwise scores the same sums one token per forward (the reference the test compares to).
//
//   output_validation --prompt TEXT --candidate STR [--candidate STR ...] [--stepwise] [--no-bos]
//
// Candidates are tokenized on their own (a leading space is part of the candidate). Sends one
// JSON line:
// {"mode","forward_calls","ranking":[{"candidate","logprob","tokens","token_logprobs"}...]} with
// the ranking sorted by logprob, highest first.
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <pith/inferlet.hpp>

namespace {

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      q += b;
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

// log p of `token` in a full-vocabulary distribution (id order); -inf when it underflowed.
double logprob(const pith::Distribution& d, uint32_t token) {
  return token < d.probs.size() && d.probs[token] > 0 ? ::log(double(d.probs[token])) : -INFINITY;
}

// JSON has no infinities: an underflowed log-probability prints as the lowest double.
std::string number(double x) {
  char b[64];
  snprintf(b, sizeof b, "%.9g", isfinite(x) ? x : -1.7976931348623157e308);
  return b;
}

struct Scored {
  std::string candidate;
  std::vector<uint32_t> tokens;
  std::vector<double> token_logprobs;
  double total = 0;
};

}  // namespace

pith::Status output_validation(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text the candidates continue");
  std::vector<std::string> candidates = flags.all("--candidate", "a continuation to score");
  bool stepwise =
      flags.flag("--stepwise", "score token by token (one forward each), not in one forward");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());
  if (candidates.empty())
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "give at least one --candidate", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  if (ctx.tokens().empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty prompt");
  // The prompt, computed once: the distribution of every candidate's first token.
  pith::Distribution after_prompt = PITH_TRY(ctx.decode_step(PITH_TOP_K_ALL));
  uint32_t forwards = 1;

  std::vector<Scored> scored;
  for (const std::string& c : candidates) {
    std::vector<uint32_t> toks = PITH_TRY(model.tokenize(c));
    if (toks.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "a candidate is empty");
    Scored s{c, toks, {}, 0};
    s.token_logprobs.push_back(logprob(after_prompt, toks[0]));
    pith::Context branch = PITH_TRY(ctx.fork());  // shares the prompt's pages
    if (toks.size() > 1) {
      // The last token is only scored.
      const std::vector<uint32_t> inputs(toks.begin(), toks.end() - 1);
      if (stepwise) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          branch.fill_tokens({inputs[i]});
          pith::Distribution d = PITH_TRY(branch.decode_step(PITH_TOP_K_ALL));
          ++forwards;
          s.token_logprobs.push_back(logprob(d, toks[i + 1]));
        }
      } else {
        branch.fill_tokens(inputs);
        std::vector<pith::Distribution> ds = PITH_TRY(branch.decode_all(PITH_TOP_K_ALL));
        ++forwards;
        if (ds.size() != inputs.size())
          return pith::Error(PITH_ERR_INTERNAL, "decode_all: wrong distribution count");
        for (size_t i = 0; i < inputs.size(); ++i)
          s.token_logprobs.push_back(logprob(ds[i], toks[i + 1]));
      }
    }
    for (double lp : s.token_logprobs) s.total += lp;
    scored.push_back(s);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const Scored& a, const Scored& b) { return a.total > b.total; });

  std::string out = std::string("{\"mode\":\"") + (stepwise ? "stepwise" : "batched") +
                    "\",\"forward_calls\":" + std::to_string(forwards) + ",\"ranking\":[";
  for (size_t i = 0; i < scored.size(); ++i) {
    const Scored& s = scored[i];
    out += std::string(i ? "," : "") + "{\"candidate\":" + quote(s.candidate) +
           ",\"logprob\":" + number(s.total) + ",\"tokens\":[";
    for (size_t t = 0; t < s.tokens.size(); ++t)
      out += (t ? "," : "") + std::to_string(s.tokens[t]);
    out += "],\"token_logprobs\":[";
    for (size_t t = 0; t < s.token_logprobs.size(); ++t)
      out += std::string(t ? "," : "") + number(s.token_logprobs[t]);
    out += "]}";
  }
  return pith::send(out + "]}");
}
PITH_INFERLET(output_validation)
