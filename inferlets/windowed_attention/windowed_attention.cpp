// windowed_attention: sliding-window attention (Longformer-style local attention, Beltagy et al.
// 2020) written as KV-page management in the inferlet: after every step the slots that fell out
// of the last --window are hidden (kvpage_mask) and pages that hold only hidden slots are freed,
// so a long generation holds a bounded number of KV pages (pith/kv_window.hpp).
//
//   windowed_attention [--prompt TEXT] [--window 32] [--max-tokens 128] [--keep-pages] [--full]
//
// --keep-pages hides the same slots but frees nothing (the attention is identical: a reference);
// --full turns the window off (plain causal attention). Sends the text, then a JSON report:
// generated token ids, the most pages held at once, pages freed, pages held at the end.
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/kv_window.hpp>

pith::Status windowed_attention(pith::Flags& flags) {
  std::string prompt =
      flags.str("--prompt", "Once upon a time, in a land far away,", "the text to continue");
  pith::KvWindow w{
      .sink = 0,
      .window = flags.u32("--window", 32, "most recent tokens that stay visible"),
      .free_pages = !flags.flag("--keep-pages", "mask only; do not free hidden pages")};
  uint32_t max_tokens = flags.u32("--max-tokens", 128, "tokens to generate");
  if (flags.flag("--full", "no window: full attention (the baseline)")) w.window = ~uint32_t{0};
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(false);  // every page this run holds is its own: the page counts are exact
  if (ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  size_t max_pages = 0;
  pith::Generation g = pith::generate_windowed(
      ctx, pith::Sampler::greedy(), pith::Stop{.max_tokens = max_tokens, .stop_at_eos = false}, w,
      &max_pages);
  if (g.tokens.size() != max_tokens)
    return pith::Error(g.error ? g.error->code : PITH_ERR_INTERNAL,
                       "generation ended: " + g.finish_reason);

  PITH_TRY(pith::send(g.text));
  pith::Json j;
  j.num("window", double(w.window == ~uint32_t{0} ? 0 : w.window))
      .num("page_size", ctx.page_size())
      .num("max_pages", double(max_pages))
      .num("pages_freed", double(w.pages_freed))
      .num("final_pages", double(ctx.pages().size()))
      .num("slots_kept", double(ctx.tokens().size()))
      .raw("tokens", pith::Json::array(g.tokens));
  return pith::send(j.dump());
}
PITH_INFERLET(windowed_attention)
