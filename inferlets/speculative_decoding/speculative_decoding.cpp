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
#include <pith/context.hpp>
#include <pith/ngram_drafter.hpp>
#include <stdio.h>
#include <stdlib.h>

namespace {

int fail(const std::string& why) {
  pith::send("error: " + why);
  return 1;
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt;
  uint32_t max_tokens = 64;
  pith::NgramDrafter drafter;
  bool bos = true, prefix_cache = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--max-tokens" && has) max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--ngram" && has) drafter.max_ngram = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--draft" && has) drafter.max_draft = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--no-bos") bos = false;
    else if (a == "--no-prefix-cache") prefix_cache = false;
    else return fail("unknown argument " + a);
  }
  if (max_tokens == 0) return fail("--max-tokens must be at least 1");

  auto model = pith::Model::open("");
  if (!model) return fail(pith::status_name(model.status()));
  auto ctx = pith::Context::create(*model);
  if (!ctx) return fail(pith::status_name(ctx.status()));
  ctx->set_prefix_cache(prefix_cache);
  if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  if (pith_status_t s = ctx->fill(prompt); s != PITH_OK) return fail(pith::status_name(s));
  const uint32_t eos = ctx->info().eos_token;

  uint32_t forwards = 1, drafted = 0, accepted = 0;
  auto first = ctx->decode_step(1);
  if (!first) return fail(pith::status_name(first.status()));
  uint32_t next = first->ids[0];  // greedy token after the computed context
  std::vector<uint32_t> out;
  std::string finish = "length";
  for (;;) {
    out.push_back(next);
    if (next == eos) finish = "eos";
    if (next == eos || out.size() >= max_tokens) break;
    ctx->fill_tokens({next});
    const size_t base = ctx->tokens().size();
    std::vector<uint32_t> draft = drafter.draft(ctx->tokens());
    if (draft.size() > max_tokens - out.size()) draft.resize(max_tokens - out.size());
    ctx->fill_tokens(draft);
    auto dists = ctx->decode_all(1);  // dists[i]: greedy token after input i (next, draft...)
    ++forwards;
    if (!dists || dists->size() != draft.size() + 1) return fail(pith::status_name(dists.status()));
    drafted += static_cast<uint32_t>(draft.size());
    size_t k = 0;
    bool stop = false;
    while (k < draft.size() && (*dists)[k].ids[0] == draft[k]) {
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
    ctx->truncate(base + k);  // keeps next and the accepted drafts, drops the rejected ones
    next = (*dists)[k].ids[0];
  }

  auto text = model->detokenize(out);
  pith::send(text ? *text : std::string());
  std::string ids;
  for (size_t i = 0; i < out.size(); ++i) ids += (i ? "," : "") + std::to_string(out[i]);
  pith::send(ids);
  char stats[256];
  snprintf(stats, sizeof stats, "{\"tokens\":%zu,\"forward_calls\":%u,\"drafted\":%u,\"accepted\":%u,\"finish\":\"%s\"}",
           out.size(), forwards, drafted, accepted, finish.c_str());
  pith::send(stats);
  return 0;
}
