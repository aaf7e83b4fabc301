// text_completion: the plain completion loop, the inferlet behind ordinary prompt-in / text-out
// serving. Sends the generated text as one message (with --tokens, a second one with the ids).
#include <pith/inferlet.hpp>

pith::Status text_completion(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to complete");
  pith::Stop stop{.max_tokens = flags.u32("--max-tokens", 32, "tokens to generate at most"),
                  .strings = flags.all("--stop", "stop once the text ends with this")};
  pith::SamplerConfig sc{.temperature = flags.f32("--temperature", 0, "0 = greedy"),
                         .top_k = flags.u32("--top-k", 0, "keep the K likeliest tokens (0 = all)"),
                         .top_p = flags.f32("--top-p", 1, "nucleus sampling mass"),
                         .min_p = flags.f32("--min-p", 0, "drop tokens below P * p(max)"),
                         .seed = flags.u64("--seed", 0, "sampling seed")};
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  bool emit_tokens = flags.flag("--tokens", "also send the generated token ids");
  bool prefix_cache = !flags.flag("--no-prefix-cache", "compute the whole prompt");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(prefix_cache);
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  pith::Generation g = ctx.generate(pith::Sampler(sc), stop);
  PITH_TRY(pith::send(g.text));
  if (emit_tokens) PITH_TRY(pith::send(pith::join(g.tokens, ",")));
  pith::log("finish: " + g.finish_reason +
            ", prompt tokens computed: " + std::to_string(ctx.prefilled_tokens()));
  return {};
}
PITH_INFERLET(text_completion)
