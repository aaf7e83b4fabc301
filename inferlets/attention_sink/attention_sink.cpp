// attention_sink: StreamingLLM (Xiao et al. 2024). The first --sink tokens stay visible forever
// (the "attention sinks" softmax leans on) next to a sliding window of the last --window tokens;
// the slots in between are hidden with kvpage_mask and their pages freed once wholly hidden, so
// generating far past the window holds a bounded number of KV pages (pith/kv_window.hpp). Kept
// slots keep their original positions (RoPE is baked into K when it is written).
//
//   attention_sink [--prompt TEXT] [--sink 4] [--window 32] [--max-tokens 128] [--keep-pages]
//
// --sink 0 is the window-only baseline; --keep-pages hides the same slots without freeing pages
// (identical attention). Sends the text, then a JSON report: generated token ids, the most pages
// held at once, pages freed, pages held at the end, and how many sink slots are still visible.
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/kv_window.hpp>

pith::Status attention_sink(pith::Flags& flags) {
  std::string prompt =
      flags.str("--prompt", "Once upon a time, in a land far away,", "the text to continue");
  pith::KvWindow w{
      .sink = flags.u32("--sink", 4, "leading tokens that stay visible"),
      .window = flags.u32("--window", 32, "most recent tokens that stay visible"),
      .free_pages = !flags.flag("--keep-pages", "mask only; do not free hidden pages")};
  uint32_t max_tokens = flags.u32("--max-tokens", 128, "tokens to generate");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(false);  // every page this run holds is its own: the page counts are exact
  if (ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  std::vector<uint32_t> sink_tokens(ctx.tokens().begin(),
                                    ctx.tokens().begin() + std::min(w.sink, ctx.tokens().size()));
  size_t max_pages = 0;
  pith::Generation g = pith::generate_windowed(
      ctx, pith::Sampler::greedy(), pith::Stop{.max_tokens = max_tokens, .stop_at_eos = false}, w,
      &max_pages);
  if (g.tokens.size() != max_tokens)
    return pith::Error(g.error ? g.error->code : PITH_ERR_INTERNAL,
                       "generation ended: " + g.finish_reason);
  // The sinks are still the context's first slots (never hidden, their page never freed).
  size_t sinks_kept = 0;
  while (sinks_kept < sink_tokens.size() && ctx.tokens()[sinks_kept] == sink_tokens[sinks_kept])
    ++sinks_kept;

  PITH_TRY(pith::send(g.text));
  pith::Json j;
  j.num("sink", double(w.sink))
      .num("window", double(w.window))
      .num("page_size", ctx.page_size())
      .num("max_pages", double(max_pages))
      .num("pages_freed", double(w.pages_freed))
      .num("final_pages", double(ctx.pages().size()))
      .num("slots_kept", double(ctx.tokens().size()))
      .num("sinks_kept", double(sinks_kept))
      .raw("tokens", pith::Json::array(g.tokens));
  return pith::send(j.dump());
}
PITH_INFERLET(attention_sink)
