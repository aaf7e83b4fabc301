// pith/kv_window.hpp: bounded attention over a growing context — the first `sink` slots
// (StreamingLLM's attention sinks; 0 for a plain sliding window) plus the last `window` computed
// slots stay visible, every slot in between is hidden with kvpage_mask, and pages whose every
// slot is hidden are freed, so a long generation holds a bounded number of KV pages.
//
//   pith::KvWindow w{.sink = 4, .window = 64};
//   for (;;) { auto d = ctx.decode_step(); ...; ctx.fill_tokens({tok}); w.apply(ctx); }
//
// Slots keep the positions they were computed at (RoPE is applied when K is written, so a kept
// slot cannot be moved to a new position). With free_pages = false the same slots are hidden but
// every page is kept: attention is identical, which makes it a reference for the freeing mode.
// The context's pages must not be shared with another context of this inferlet (page masks are
// per page handle).
#pragma once

#include <pith/context.hpp>

namespace pith {

struct KvWindow {
  size_t sink = 0;
  size_t window = 64;
  bool free_pages = true;
  size_t hidden_to = 0;  // slots [sink, hidden_to) are hidden already (context slot indices)
  size_t pages_freed = 0;

  // Hides what fell out of the window since the last call and frees fully hidden pages.
  Status apply(Context& ctx) {
    const size_t computed = ctx.computed();
    if (hidden_to < sink) hidden_to = sink;
    if (computed <= window || computed - window <= hidden_to) return {};
    const size_t end = computed - window;
    PITH_TRY(ctx.mask(hidden_to, end));
    hidden_to = end;
    if (free_pages) {
      size_t dropped = ctx.drop_masked_pages();
      pages_freed += dropped;
      hidden_to -= dropped * ctx.page_size();  // later slots moved down by the dropped pages
    }
    return {};
  }
};

// Context::generate with the window applied after every step. *max_pages receives the most
// pages the context held at once (the peak is right after a step's forward).
inline Generation generate_windowed(Context& ctx, Sampler sampler, Stop stop, KvWindow& w,
                                    size_t* max_pages) {
  Generation g;
  if (stop.eos_ids.empty()) stop.eos_ids = ctx.eos_tokens();
  for (;;) {
    Result<Distribution> d = ctx.decode_step(sampler.step_top_k(), sampler.shaping());
    if (!d) {
      g.finish_reason = status_name(d.status());
      g.error = std::move(d).take_error();
      break;
    }
    if (max_pages && ctx.pages().size() > *max_pages) *max_pages = ctx.pages().size();
    uint32_t tok = sampler.sample_step(*d);
    g.tokens.push_back(tok);
    ctx.fill_tokens({tok});
    if (Status s = w.apply(ctx); !s) {
      g.finish_reason = status_name(s.status());
      g.error = std::move(s).take_error();
      break;
    }
    Result<std::string> text = ctx.model().detokenize(g.tokens);
    if (!text) {
      g.finish_reason = status_name(text.status());
      g.error = std::move(text).take_error();
      break;
    }
    g.text = std::move(*text);
    if (const char* why = stop.check(g.tokens, g.text); *why) {
      g.finish_reason = why;
      break;
    }
  }
  return g;
}

}  // namespace pith
