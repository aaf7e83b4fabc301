// text_completion: the plain completion loop on the SDK — the inferlet behind ordinary
// prompt-in / text-out serving.
//
//   text_completion --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--top-k K]
//                   [--min-p P] [--seed S] [--stop STR]... [--no-bos] [--tokens] [--no-prefix-cache]
//
// Sends the generated text as one message (with --tokens, a second message with the ids).
#include <pith/context.hpp>
#include <stdlib.h>

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt;
  pith::SamplerConfig sc;
  pith::Stop stop;
  stop.max_tokens = 32;
  bool bos = true, emit_tokens = false, prefix_cache = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--max-tokens" && has) stop.max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--temperature" && has) sc.temperature = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--top-p" && has) sc.top_p = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--top-k" && has) sc.top_k = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--min-p" && has) sc.min_p = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--seed" && has) sc.seed = strtoull(args[++i].c_str(), nullptr, 10);
    else if (a == "--stop" && has) stop.strings.push_back(args[++i]);
    else if (a == "--no-bos") bos = false;
    else if (a == "--tokens") emit_tokens = true;
    else if (a == "--no-prefix-cache") prefix_cache = false;
    else {
      pith::send("error: unknown argument " + a);
      return 2;
    }
  }

  auto model = pith::Model::open("");
  if (!model) return pith::send(std::string("error: ") + pith::status_name(model.status())), 1;
  auto ctx = pith::Context::create(*model);
  if (!ctx) return pith::send(std::string("error: ") + pith::status_name(ctx.status())), 1;
  ctx->set_prefix_cache(prefix_cache);
  if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  if (pith_status_t s = ctx->fill(prompt); s != PITH_OK) return pith::send(std::string("error: ") + pith::status_name(s)), 1;

  pith::Generation g = ctx->generate(pith::Sampler(sc), stop);
  pith::send(g.text);
  if (emit_tokens) {
    std::string ids;
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      if (i) ids += ",";
      ids += std::to_string(g.tokens[i]);
    }
    pith::send(ids);
  }
  pith::log("finish: " + g.finish_reason + ", prompt tokens computed: " + std::to_string(ctx->prefilled_tokens()));
  return 0;
}
