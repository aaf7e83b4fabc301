// speculative_decoding: greedy decoding sped up by n-gram prompt lookup (Saxena 2023). Each step
// drafts up to --draft tokens by copying what followed the last n-gram's earlier occurrence in
// the context (pith/ngram_drafter.hpp), then verifies them in ONE forward that returns the
// greedy token after every draft position (Context::decode_all): the longest agreeing prefix is
// kept, plus the model's own token after it, and the rejected drafts are rolled back
// (Context::truncate). The output is exactly greedy decoding's; only the number of forwards
// drops when drafts hit.
//
//   speculative_decoding --prompt TEXT [--max-tokens N] [--ngram N] [--draft K] [--no-bos]
//                        [--no-prefix-cache]
//
// Messages: the generated text, the token ids (comma-separated), then one JSON line:
//   {"tokens","forward_calls","drafted","accepted","finish"}   (forward_calls includes the prefill)
#include <stdio.h>

#include <pith/inferlet.hpp>
#include <pith/ngram_drafter.hpp>

pith::Status speculative_decoding(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to continue");
  uint32_t max_tokens = flags.u32("--max-tokens", 64, "tokens to generate at most");
  pith::NgramDrafter drafter;
  drafter.max_ngram =
      flags.u32("--ngram", drafter.max_ngram, "longest n-gram matched in the context");
  drafter.max_draft = flags.u32("--draft", drafter.max_draft, "draft tokens verified per forward");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  bool prefix_cache = !flags.flag("--no-prefix-cache", "compute the whole prompt");
  PITH_TRY(flags.done());
  if (max_tokens == 0)
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--max-tokens must be at least 1", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(prefix_cache);
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  const uint32_t eos = ctx.info().eos_token;

  uint32_t forwards = 1, drafted = 0, accepted = 0;
  uint32_t next = PITH_TRY(ctx.decode_step(1)).ids[0];  // greedy token after the computed context
  std::vector<uint32_t> out;
  std::string finish = "length";
  for (;;) {
    out.push_back(next);
    if (next == eos) finish = "eos";
    if (next == eos || out.size() >= max_tokens) break;
    ctx.fill_tokens({next});
    const size_t base = ctx.tokens().size();
    std::vector<uint32_t> draft = drafter.draft(ctx.tokens());
    if (draft.size() > max_tokens - out.size()) draft.resize(max_tokens - out.size());
    ctx.fill_tokens(draft);
    // dists[i]: greedy token after input i (next, draft...)
    std::vector<pith::Distribution> dists = PITH_TRY(ctx.decode_all(1));
    ++forwards;
    if (dists.size() != draft.size() + 1)
      return pith::Error(PITH_ERR_INTERNAL,
                         "decode_all returned " + std::to_string(dists.size()) + " distributions");
    drafted += static_cast<uint32_t>(draft.size());
    size_t k = 0;
    bool stop = false;
    while (k < draft.size() && dists[k].ids[0] == draft[k]) {
      out.push_back(draft[k++]);
      if (out.back() == eos || out.size() >= max_tokens) {
        stop = true;
        break;
      }
    }
    accepted += static_cast<uint32_t>(k);
    if (stop) {
      if (out.back() == eos) finish = "eos";
      break;
    }
    ctx.truncate(base + k);  // keeps next and the accepted drafts, drops the rejected ones
    next = dists[k].ids[0];
  }

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(out))));
  PITH_TRY(pith::send(pith::join(out, ",")));
  char stats[256];
  snprintf(stats, sizeof stats,
           "{\"tokens\":%zu,\"forward_calls\":%u,\"drafted\":%u,\"accepted\":%u,\"finish\":\"%s\"}",
           out.size(), forwards, drafted, accepted, finish.c_str());
  return pith::send(stats);
}
PITH_INFERLET(speculative_decoding)
