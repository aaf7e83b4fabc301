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
#include <pith/json.hpp>
#include <stdlib.h>

namespace {

int fail(const std::string& what, pith_status_t s) {
  pith::send("error: " + what + ": " + pith::status_name(s));
  return 1;
}

std::string beam_json(const pith::Model& model, const pith::Beam& b) {
  pith::Result<std::string> text = model.detokenize(b.tokens);
  pith::Json j;
  j.str("text", text.value_or("")).raw("tokens", pith::Json::array(b.tokens)).num("logprob", b.logprob);
  return j.boolean("finished", b.finished).dump();
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt;
  pith::BeamSearchOptions opt;
  bool bos = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--beams" && has) opt.beams = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--expand" && has) opt.expand = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--max-tokens" && has) opt.max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--no-eos") opt.stop_at_eos = false;
    else if (a == "--no-bos") bos = false;
    else return pith::send("error: unknown argument " + a), 2;
  }

  auto model = pith::Model::open("");
  if (!model) return fail("open model", model.status());
  auto ids = model->tokenize(prompt);
  if (!ids) return fail("tokenize", ids.status());
  auto ctx = pith::Context::create(*model);
  if (!ctx) return fail("context", ctx.status());
  std::vector<uint32_t> prompt_ids;
  if (bos && ctx->info().add_bos) prompt_ids.push_back(ctx->info().bos_token);
  prompt_ids.insert(prompt_ids.end(), ids->begin(), ids->end());
  if (prompt_ids.empty()) return pith::send("error: empty prompt"), 2;

  // Compute all but the last prompt token once; the beam and the greedy search each start from
  // a context sharing those pages, with the last token pending.
  std::vector<uint32_t> head(prompt_ids.begin(), prompt_ids.end() - 1);
  ctx->fill_tokens(head);
  if (pith_status_t s = ctx->flush(); s != PITH_OK) return fail("prefill", s);
  auto greedy_ctx = ctx->fork();
  if (!greedy_ctx) return fail("fork", greedy_ctx.status());
  ctx->fill_tokens({prompt_ids.back()});
  greedy_ctx->fill_tokens({prompt_ids.back()});

  auto beams = pith::beam_search(*ctx, opt);
  if (!beams) return fail("beam search", beams.status());
  pith::BeamSearchOptions g = opt;
  g.beams = 1;
  g.expand = 1;
  auto greedy = pith::beam_search(*greedy_ctx, g);
  if (!greedy) return fail("greedy", greedy.status());

  std::string all = "[";
  for (size_t i = 0; i < beams->size(); ++i) all += (i ? "," : "") + beam_json(*model, (*beams)[i]);
  all += "]";
  pith::Json out;
  out.raw("prompt_tokens", pith::Json::array(prompt_ids)).raw("best", beam_json(*model, (*beams)[0]));
  out.raw("beams", all).raw("greedy", beam_json(*model, (*greedy)[0]));
  pith::send(out.dump());
  return 0;
}
