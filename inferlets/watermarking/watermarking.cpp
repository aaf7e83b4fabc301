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
#include <pith/context.hpp>
#include <pith/watermark.hpp>
#include <stdio.h>
#include <stdlib.h>

namespace {

int fail(const std::string& why) {
  pith::send("error: " + why);
  return 1;
}

std::string score_json(const pith::WatermarkScore& s) {
  char buf[128];
  snprintf(buf, sizeof buf, "\"green\":%u,\"scored\":%u,\"z\":%.4f", s.green, s.scored, s.z);
  return buf;
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt, text, ids_arg;
  uint32_t max_tokens = 200;
  float temperature = 1.0f;
  uint64_t seed = 0;
  pith::WatermarkKey key;
  bool watermark = true, detect = false, bos = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--max-tokens" && has) max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--temperature" && has) temperature = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--seed" && has) seed = strtoull(args[++i].c_str(), nullptr, 10);
    else if (a == "--key" && has) key.key = strtoull(args[++i].c_str(), nullptr, 10);
    else if (a == "--gamma" && has) key.gamma = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--delta" && has) key.delta = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--no-watermark") watermark = false;
    else if (a == "--detect") detect = true;
    else if (a == "--ids" && has) ids_arg = args[++i];
    else if (a == "--text" && has) text = args[++i];
    else if (a == "--no-bos") bos = false;
    else return fail("unknown argument " + a);
  }
  if (!(key.gamma > 0 && key.gamma < 1)) return fail("--gamma must lie in (0, 1)");
  auto model = pith::Model::open("");
  if (!model) return fail(pith::status_name(model.status()));

  if (detect) {
    std::vector<uint32_t> ids;
    if (!ids_arg.empty()) {
      for (const char* p = ids_arg.c_str(); *p;) {
        char* end = nullptr;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p) return fail("--ids: expected comma-separated numbers");
        ids.push_back(static_cast<uint32_t>(v));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      auto t = model->tokenize(text);
      if (!t) return fail(pith::status_name(t.status()));
      ids = *t;
    }
    pith::send("{" + score_json(pith::watermark_score(key, ids)) + "}");
    return 0;
  }

  auto ctx = pith::Context::create(*model);
  if (!ctx) return fail(pith::status_name(ctx.status()));
  if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  if (pith_status_t s = ctx->fill(prompt); s != PITH_OK) return fail(pith::status_name(s));
  if (ctx->tokens().empty()) return fail("empty prompt: the first token needs a previous one");
  std::vector<uint32_t> ids{ctx->tokens().back()};
  pith::Rng rng(seed);
  for (uint32_t i = 0; i < max_tokens; ++i) {
    auto d = ctx->decode_step(PITH_TOP_K_ALL);
    if (!d) return fail(pith::status_name(d.status()));
    uint32_t tok = pith::sample_watermarked(*d, ids.back(), watermark ? &key : nullptr, temperature, rng);
    ids.push_back(tok);
    ctx->fill_tokens({tok});
  }
  auto out = model->detokenize(std::vector<uint32_t>(ids.begin() + 1, ids.end()));
  pith::send(out ? *out : std::string());
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  pith::send("{\"ids\":[" + list + "]," + score_json(pith::watermark_score(key, ids)) + "}");
  return 0;
}
