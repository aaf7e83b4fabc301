// hierarchical_attention: a two-level attention structure (in the spirit of Tang et al. 2022's
// hierarchical attention) written with explicit attention masks. The prompt is cut into segments
// of --segment tokens, each followed by a summary slot. A segment's tokens see the global BOS,
// the summaries of earlier segments and their own segment (causally); a summary sees the same
// plus its whole segment; generated tokens see BOS, every summary and each other — never the
// raw segment tokens.
//
//   hierarchical_attention [--prompt TEXT] [--segment 8] [--max-tokens 12]
//                          [--mode masked|stepwise|causal]
//
// masked (default): the prompt in one forward under the full mask matrix, then the segment slots
// hidden with kvpage_mask so ordinary decode steps keep the structure. stepwise: a reference
// that computes every prompt and generated token in its own forward with a one-row mask from the
// same rule. causal: the same slots under plain causal attention. Sends the text, then JSON with
// the generated ids and each step's top probability.
#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

enum class Kind { Global, Token, Summary, Generated };

struct Layout {
  std::vector<Kind> kind;
  std::vector<int> seg;  // segment of a Token / Summary slot, -1 otherwise
  void add(Kind k, int s) {
    kind.push_back(k);
    seg.push_back(s);
  }
  // May the token in slot q attend to slot k?
  bool visible(size_t q, size_t k) const {
    if (k > q) return false;
    if (k == q || kind[k] == Kind::Global) return true;
    if (kind[q] == Kind::Generated) return kind[k] == Kind::Summary || kind[k] == Kind::Generated;
    if (kind[k] == Kind::Summary) return seg[k] < seg[q];
    return kind[k] == Kind::Token && seg[k] == seg[q];
  }
  // The mask of slots [first, first + rows) over a context of `len` slots.
  pith::AttentionMask rows(size_t first, size_t n, size_t len) const {
    pith::AttentionMask m(n, len);
    for (size_t r = 0; r < n; ++r)
      for (size_t k = 0; k < len; ++k)
        if (visible(first + r, k)) m.allow(r, k, k + 1);
    return m;
  }
};

}  // namespace

pith::Status hierarchical_attention(pith::Flags& flags) {
  std::string prompt =
      flags.str("--prompt",
                "The river bends past the mill. Children play on its banks. "
                "At night the water is black and loud. In spring it floods the road.",
                "the text, cut into segments");
  uint32_t seg_len = flags.u32("--segment", 8, "tokens per segment");
  uint32_t max_tokens = flags.u32("--max-tokens", 12, "tokens to generate");
  std::string mode =
      flags.str("--mode", "masked", "masked (one forward), stepwise (a mask per token) or causal");
  PITH_TRY(flags.done());
  if (mode != "masked" && mode != "stepwise" && mode != "causal")
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "bad --mode " + mode, 2);
  if (seg_len == 0) return pith::Error(PITH_ERR_BAD_ARGUMENT, "--segment must be positive", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(false);
  std::vector<uint32_t> text_ids = PITH_TRY(model.tokenize(prompt));
  std::vector<uint32_t> marker = PITH_TRY(model.tokenize("\n"));  // the summary slot's token
  if (marker.empty()) return pith::Error(PITH_ERR_INTERNAL, "the newline has no token");

  // Slots: [BOS] seg0 σ0 seg1 σ1 ... (the last segment may be shorter).
  Layout L;
  std::vector<uint32_t> slots;
  if (ctx.info().add_bos) {
    slots.push_back(ctx.info().bos_token);
    L.add(Kind::Global, -1);
  }
  int segments = 0;
  for (size_t i = 0; i < text_ids.size(); i += seg_len, ++segments) {
    for (size_t j = i; j < i + seg_len && j < text_ids.size(); ++j) {
      slots.push_back(text_ids[j]);
      L.add(Kind::Token, segments);
    }
    slots.push_back(marker[0]);
    L.add(Kind::Summary, segments);
  }
  const size_t n = slots.size();

  std::vector<uint32_t> out;
  std::vector<float> top_p;
  pith::Result<pith::Distribution> d = pith::Error(PITH_ERR_INTERNAL, "no step ran");
  if (mode == "masked") {
    ctx.fill_tokens(slots);
    d = ctx.decode_step(1, L.rows(0, n, n));
    // From here on ordinary (causal) steps: hiding the raw segment tokens keeps the structure.
    for (size_t k = 0; k < n && d;) {
      size_t e = k;
      while (e < n && L.kind[e] == Kind::Token) ++e;
      if (e > k) PITH_TRY(ctx.mask(k, e));
      k = e > k ? e : k + 1;
    }
  } else if (mode == "stepwise") {
    for (size_t k = 0; k < n; ++k) {
      ctx.fill_tokens({slots[k]});
      d = ctx.decode_step(1, L.rows(k, 1, k + 1));
      if (!d) break;
    }
  } else {
    ctx.fill_tokens(slots);
    d = ctx.decode_step(1);
  }
  while (d && out.size() < max_tokens) {
    out.push_back(d->ids[0]);
    top_p.push_back(d->probs[0]);
    if (out.size() == max_tokens) break;
    ctx.fill_tokens({d->ids[0]});
    L.add(Kind::Generated, -1);
    const size_t s = ctx.tokens().size() - 1;
    d = mode == "stepwise" ? ctx.decode_step(1, L.rows(s, 1, s + 1)) : ctx.decode_step(1);
  }
  if (out.size() != max_tokens) return d.error().context("decode");

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(out))));
  pith::Json j;
  j.str("mode", mode)
      .num("segments", segments)
      .num("prompt_slots", double(n))
      .raw("tokens", pith::Json::array(out))
      .raw("top_probs", pith::Json::array(top_p));
  return pith::send(j.dump());
}
PITH_INFERLET(hierarchical_attention)
