// watermarking: green-list watermarked generation and its detector (Kirchenbauer et al. 2023,
// pith/watermark.hpp). Generation samples from the full-vocabulary distribution with the green
// tokens of each step (keyed by the previous token) boosted by e^delta; detection counts green
// tokens and reports the z-score.
//
//   watermarking --prompt TEXT [--max-tokens N] [--temperature T] [--seed S] [--key K]
//                [--gamma G] [--delta D] [--no-watermark] [--no-bos]
//   watermarking --detect --ids ID,ID,...   (the first id is the context token) [--key --gamma]
//   watermarking --detect --text TEXT       (tokenized by the model; scored from its 2nd token)
//
// Generation sends the text, then JSON {"ids":[context, generated...],"green","scored","z"}; the
// end token does not stop it (the length is exactly --max-tokens). Detection sends JSON
// {"green","scored","z"}.
#include <stdio.h>
#include <stdlib.h>

#include <pith/inferlet.hpp>
#include <pith/watermark.hpp>

namespace {

std::string score_json(const pith::WatermarkScore& s) {
  char buf[128];
  snprintf(buf, sizeof buf, "\"green\":%u,\"scored\":%u,\"z\":%.4f", s.green, s.scored, s.z);
  return buf;
}

}  // namespace

pith::Status watermarking(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to continue");
  uint32_t max_tokens = flags.u32("--max-tokens", 200, "tokens to generate");
  float temperature = flags.f32("--temperature", 1.0f, "sampling temperature");
  uint64_t seed = flags.u64("--seed", 0, "sampling seed");
  pith::WatermarkKey key;
  key.key = flags.u64("--key", key.key, "the watermark's secret key");
  key.gamma = flags.f32("--gamma", key.gamma, "fraction of the vocabulary on the green list");
  key.delta = flags.f32("--delta", key.delta, "logit bias added to green tokens");
  bool watermark = !flags.flag("--no-watermark", "sample without the watermark (the control)");
  bool detect = flags.flag("--detect", "score --ids or --text instead of generating");
  std::string ids_arg = flags.str("--ids", "", "comma-separated token ids to score (--detect)");
  std::string text = flags.str("--text", "", "text to score (--detect)");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());
  if (!(key.gamma > 0 && key.gamma < 1))
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--gamma must lie in (0, 1)", 2);
  pith::Model model = PITH_TRY(pith::Model::open(""));

  if (detect) {
    std::vector<uint32_t> ids;
    if (!ids_arg.empty()) {
      for (const char* p = ids_arg.c_str(); *p;) {
        char* end = nullptr;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p)
          return pith::Error(PITH_ERR_BAD_ARGUMENT, "--ids: expected comma-separated numbers", 2);
        ids.push_back(static_cast<uint32_t>(v));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      ids = PITH_TRY(model.tokenize(text));
    }
    return pith::send("{" + score_json(pith::watermark_score(key, ids)) + "}");
  }

  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  if (ctx.tokens().empty())
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty prompt: the first token needs a previous one");
  std::vector<uint32_t> ids{ctx.tokens().back()};
  pith::Rng rng(seed);
  for (uint32_t i = 0; i < max_tokens; ++i) {
    pith::Distribution d = PITH_TRY(ctx.decode_step(PITH_TOP_K_ALL));
    uint32_t tok =
        pith::sample_watermarked(d, ids.back(), watermark ? &key : nullptr, temperature, rng);
    ids.push_back(tok);
    ctx.fill_tokens({tok});
  }
  PITH_TRY(
      pith::send(PITH_TRY(model.detokenize(std::vector<uint32_t>(ids.begin() + 1, ids.end())))));
  return pith::send("{\"ids\":[" + pith::join(ids, ",") + "]," +
                    score_json(pith::watermark_score(key, ids)) + "}");
}
PITH_INFERLET(watermarking)
