// beam_search: custom decoding in the inferlet (paper R2) with the SDK's pith::beam_search —
// beams are forked Contexts sharing their prefix's KV pages. Also runs greedy decoding from the
// same prompt (a beam search with one beam and one candidate) for comparison.
//
//   beam_search --prompt TEXT [--beams B] [--expand K] [--max-tokens N] [--no-eos] [--no-bos]
//
// Sends one JSON message:
//   {"prompt_tokens":[...], "best":{"text","tokens","logprob"},
//    "beams":[{"tokens","logprob","finished"}...],        (final beams, best first)
//    "greedy":{"text","tokens","logprob"}}
#include <pith/beam_search.hpp>
#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

pith::Result<std::string> beam_json(const pith::Model& model, const pith::Beam& b) {
  std::string text = PITH_TRY(model.detokenize(b.tokens));
  pith::Json j;
  j.str("text", text).raw("tokens", pith::Json::array(b.tokens)).num("logprob", b.logprob);
  return j.boolean("finished", b.finished).dump();
}

}  // namespace

pith::Status beam_search(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to continue");
  pith::BeamSearchOptions opt;
  opt.beams = flags.u32("--beams", opt.beams, "beams kept each step");
  opt.expand = flags.u32("--expand", opt.expand, "candidates per beam (0 = --beams)");
  opt.max_tokens = flags.u32("--max-tokens", opt.max_tokens, "tokens per beam");
  opt.stop_at_eos = !flags.flag("--no-eos", "keep extending beams past the end token");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  std::vector<uint32_t> ids = PITH_TRY(model.tokenize(prompt));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  std::vector<uint32_t> prompt_ids;
  if (bos && ctx.info().add_bos) prompt_ids.push_back(ctx.info().bos_token);
  prompt_ids.insert(prompt_ids.end(), ids.begin(), ids.end());
  if (prompt_ids.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty prompt", 2);

  // Compute all but the last prompt token once; the beam and the greedy search each start from
  // a context sharing those pages, with the last token pending.
  std::vector<uint32_t> head(prompt_ids.begin(), prompt_ids.end() - 1);
  ctx.fill_tokens(head);
  PITH_TRY(ctx.flush());
  pith::Context greedy_ctx = PITH_TRY(ctx.fork());
  ctx.fill_tokens({prompt_ids.back()});
  greedy_ctx.fill_tokens({prompt_ids.back()});

  std::vector<pith::Beam> beams = PITH_TRY(pith::beam_search(ctx, opt));
  pith::BeamSearchOptions g = opt;
  g.beams = 1;
  g.expand = 1;
  std::vector<pith::Beam> greedy = PITH_TRY(pith::beam_search(greedy_ctx, g));

  std::string all = "[";
  for (size_t i = 0; i < beams.size(); ++i)
    all += (i ? "," : "") + PITH_TRY(beam_json(model, beams[i]));
  all += "]";
  pith::Json out;
  out.raw("prompt_tokens", pith::Json::array(prompt_ids))
      .raw("best", PITH_TRY(beam_json(model, beams[0])));
  out.raw("beams", all).raw("greedy", PITH_TRY(beam_json(model, greedy[0])));
  return pith::send(out.dump());
}
PITH_INFERLET(beam_search)
