// best_of_n: n samples from one prompt, each scored by its mean token log-probability, the best
// returned. The prompt is prefilled once; the n samples fork that context (Context::fork shares
// its full KV pages and copies only the partial last one), and their decode steps are issued
// together each round (start_step on every sample, then finish_step) so they batch on the
// server.
//
//   best_of_n --prompt TEXT [--n N] [--max-tokens M] [--temperature T] [--top-k K] [--seed S]
//             [--no-bos] [--no-prefix-cache]
//
// Sends the best sample's text, then one JSON line:
//   {"best","prompt_tokens","prefilled","forwarded","samples":[{"text","tokens","score"}...]}
// prompt_tokens: tokens of the prompt (BOS included); prefilled: prompt tokens computed by all
// contexts together (the parent's prefill; the samples add none); forwarded: every token
// computed, prompt and decode steps (prompt_tokens + n * (M - 1) without prefix-cache hits).
#include <math.h>
#include <stdio.h>

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

// log p of the sampled token: it was drawn from the distribution's top-K, so its probability
// is there (the model's, before temperature).
double logprob(const pith::Distribution& d, uint32_t token) {
  for (size_t i = 0; i < d.ids.size(); ++i)
    if (d.ids[i] == token) return d.probs[i] > 0 ? ::log(double(d.probs[i])) : -1e30;
  return -1e30;
}

struct Sample {
  pith::Context ctx;
  pith::Sampler sampler;
  std::vector<uint32_t> tokens;
  double logprob_sum = 0;
  double score() const { return tokens.empty() ? -1e30 : logprob_sum / double(tokens.size()); }
};

}  // namespace

pith::Status best_of_n(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to continue");
  uint32_t n = flags.u32("--n", 4, "samples");
  uint32_t max_tokens = flags.u32("--max-tokens", 16, "tokens per sample");
  float temperature = flags.f32("--temperature", 1.0f, "sampling temperature");
  uint32_t top_k = flags.u32("--top-k", 64, "sample among the K likeliest tokens");
  uint64_t seed = flags.u64("--seed", 0, "sampling seed (sample i uses seed * 1000 + i)");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  bool prefix_cache = !flags.flag("--no-prefix-cache", "compute the whole prompt");
  PITH_TRY(flags.done());
  if (n == 0 || max_tokens == 0 || top_k == 0)
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--n, --max-tokens and --top-k must be at least 1",
                       2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context root = PITH_TRY(pith::Context::create(model));
  root.set_prefix_cache(prefix_cache);
  if (bos && root.info().add_bos) root.fill_tokens({root.info().bos_token});
  PITH_TRY(root.fill(prompt));
  const size_t prompt_tokens = root.tokens().size();
  pith::Distribution first = PITH_TRY(root.decode_step(top_k));  // the one prefill, shared by all

  std::vector<Sample> samples;
  for (uint32_t i = 0; i < n; ++i) {
    Sample s{
        PITH_TRY(root.fork()), pith::Sampler::top_k(top_k, temperature, seed * 1000 + i), {}, 0};
    uint32_t tok = s.sampler.sample(first);
    s.logprob_sum += logprob(first, tok);
    s.tokens.push_back(tok);
    s.ctx.fill_tokens({tok});
    samples.push_back(static_cast<Sample&&>(s));
  }
  for (uint32_t step = 1; step < max_tokens; ++step) {
    for (Sample& s : samples)  // all forwards in flight before waiting: they batch
      PITH_TRY(s.ctx.start_step(top_k));
    for (Sample& s : samples) {
      pith::Distribution d = PITH_TRY(s.ctx.finish_step());
      uint32_t tok = s.sampler.sample(d);
      s.logprob_sum += logprob(d, tok);
      s.tokens.push_back(tok);
      s.ctx.fill_tokens({tok});
    }
  }

  size_t best = 0;
  uint32_t prefilled = root.prefilled_tokens(), forwarded = root.forwarded_tokens();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].score() > samples[best].score()) best = i;
    prefilled += samples[i].ctx.prefilled_tokens();
    forwarded += samples[i].ctx.forwarded_tokens();
  }
  std::string out = "{\"best\":" + std::to_string(best) +
                    ",\"prompt_tokens\":" + std::to_string(prompt_tokens) +
                    ",\"prefilled\":" + std::to_string(prefilled) +
                    ",\"forwarded\":" + std::to_string(forwarded) + ",\"samples\":[";
  std::string best_text;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::string text = PITH_TRY(model.detokenize(samples[i].tokens));
    if (i == best) best_text = text;
    char score[64];
    snprintf(score, sizeof score, "%.9g", samples[i].score());
    out += std::string(i ? "," : "") + "{\"text\":" + quote(text) + ",\"tokens\":[";
    for (size_t t = 0; t < samples[i].tokens.size(); ++t)
      out += (t ? "," : "") + std::to_string(samples[i].tokens[t]);
    out += std::string("],\"score\":") + score + "}";
  }
  PITH_TRY(pith::send(best_text));
  return pith::send(out + "]}");
}
PITH_INFERLET(best_of_n)
