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
#include <pith/context.hpp>
#include <stdio.h>
#include <stdlib.h>

namespace {

int fail(const std::string& why) {
  pith::send("error: " + why);
  return 1;
}

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

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt;
  uint32_t n = 4, max_tokens = 16, top_k = 64;
  float temperature = 1.0f;
  uint64_t seed = 0;
  bool bos = true, prefix_cache = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--n" && has) n = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--max-tokens" && has) max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--temperature" && has) temperature = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--top-k" && has) top_k = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--seed" && has) seed = strtoull(args[++i].c_str(), nullptr, 10);
    else if (a == "--no-bos") bos = false;
    else if (a == "--no-prefix-cache") prefix_cache = false;
    else return fail("unknown argument " + a);
  }
  if (n == 0 || max_tokens == 0 || top_k == 0) return fail("--n, --max-tokens and --top-k must be at least 1");

  auto model = pith::Model::open("");
  if (!model) return fail(pith::status_name(model.status()));
  auto root = pith::Context::create(*model);
  if (!root) return fail(pith::status_name(root.status()));
  root->set_prefix_cache(prefix_cache);
  if (bos && root->info().add_bos) root->fill_tokens({root->info().bos_token});
  if (pith_status_t s = root->fill(prompt); s != PITH_OK) return fail(pith::status_name(s));
  const size_t prompt_tokens = root->tokens().size();
  auto first = root->decode_step(top_k);  // the one prefill; every sample starts from it
  if (!first) return fail(pith::status_name(first.status()));

  std::vector<Sample> samples;
  for (uint32_t i = 0; i < n; ++i) {
    auto child = root->fork();
    if (!child) return fail(pith::status_name(child.status()));
    Sample s{static_cast<pith::Context&&>(*child), pith::Sampler::top_k(top_k, temperature, seed * 1000 + i), {}, 0};
    uint32_t tok = s.sampler.sample(*first);
    s.logprob_sum += logprob(*first, tok);
    s.tokens.push_back(tok);
    s.ctx.fill_tokens({tok});
    samples.push_back(static_cast<Sample&&>(s));
  }
  for (uint32_t step = 1; step < max_tokens; ++step) {
    for (Sample& s : samples)  // all forwards in flight before waiting: they batch
      if (pith_status_t st = s.ctx.start_step(top_k); st != PITH_OK) return fail(pith::status_name(st));
    for (Sample& s : samples) {
      auto d = s.ctx.finish_step();
      if (!d) return fail(pith::status_name(d.status()));
      uint32_t tok = s.sampler.sample(*d);
      s.logprob_sum += logprob(*d, tok);
      s.tokens.push_back(tok);
      s.ctx.fill_tokens({tok});
    }
  }

  size_t best = 0;
  uint32_t prefilled = root->prefilled_tokens(), forwarded = root->forwarded_tokens();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].score() > samples[best].score()) best = i;
    prefilled += samples[i].ctx.prefilled_tokens();
    forwarded += samples[i].ctx.forwarded_tokens();
  }
  std::string out = "{\"best\":" + std::to_string(best) + ",\"prompt_tokens\":" + std::to_string(prompt_tokens) +
                    ",\"prefilled\":" + std::to_string(prefilled) + ",\"forwarded\":" + std::to_string(forwarded) +
                    ",\"samples\":[";
  std::string best_text;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto text = model->detokenize(samples[i].tokens);
    if (i == best) best_text = text ? *text : std::string();
    char score[64];
    snprintf(score, sizeof score, "%.9g", samples[i].score());
    out += std::string(i ? "," : "") + "{\"text\":" + quote(text ? *text : std::string()) + ",\"tokens\":[";
    for (size_t t = 0; t < samples[i].tokens.size(); ++t) out += (t ? "," : "") + std::to_string(samples[i].tokens[t]);
    out += std::string("],\"score\":") + score + "}";
  }
  pith::send(best_text);
  pith::send(out + "]}");
  return 0;
}
