// tree_of_thought: Tree of Thoughts (Yao et al. 2023) as breadth-first search. Each state of the
// frontier proposes --expand thoughts (forks of its context, so they share its KV pages), all
// proposals of a level decode together, each is valued by the mean log-probability of its
// tokens, and the best --breadth survive. The best final state writes the answer.
//
//   tree_of_thought --prompt TEXT [--breadth 2] [--expand 3] [--depth 2] [--thought-tokens 8]
//                   [--answer-tokens 8] [--temperature 0.8] [--seed 1]
//
// Sends the answer text, then a JSON report (forks, evaluations, pruned, token accounting).
#include <algorithm>
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/parallel.hpp>

namespace {

struct State {
  pith::Context ctx;
  double score = 0;            // sum over levels of the mean log-probability of each thought
  std::vector<uint32_t> path;  // every thought token along the way
};

}  // namespace

pith::Status tree_of_thought(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "Solve 24 with 4 7 8 8.", "the problem");
  uint32_t breadth = flags.u32("--breadth", 2, "states kept per level (beam width)");
  uint32_t expand = flags.u32("--expand", 3, "thoughts proposed per state");
  uint32_t depth = flags.u32("--depth", 2, "levels of thoughts");
  uint32_t thought_tokens = flags.u32("--thought-tokens", 8, "tokens per thought");
  uint32_t answer_tokens = flags.u32("--answer-tokens", 8, "tokens of the final answer");
  float temperature = flags.f32("--temperature", 0.8f, "sampling temperature of the thoughts");
  uint64_t seed = flags.u64("--seed", 1, "sampling seed");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context root = PITH_TRY(pith::Context::create(model));
  if (root.info().add_bos) root.fill_tokens({root.info().bos_token});
  PITH_TRY(root.fill(prompt));

  pith::TokenLedger ledger;
  uint32_t forks = 0, evaluations = 0, pruned = 0, shared_pages = 0;
  pith::ParallelStats par;
  std::vector<State> frontier;
  frontier.push_back({static_cast<pith::Context&&>(root), 0, {}});
  for (uint32_t level = 0; level < depth; ++level) {
    std::vector<State> cands;
    for (State& s : frontier) {
      std::vector<pith::Context> kids = PITH_TRY(pith::fork_n(s.ctx, expand));
      forks += expand;
      for (pith::Context& k : kids) {
        shared_pages += pith::shared_prefix_pages(s.ctx, k);
        PITH_TRY(k.fill("\nStep " + std::to_string(level + 1) + ":"));
        cands.push_back({static_cast<pith::Context&&>(k), s.score, s.path});
      }
      ledger.computed(s.ctx);
    }
    std::vector<pith::Branch> bs;
    for (size_t i = 0; i < cands.size(); ++i)
      bs.push_back({&cands[i].ctx,
                    pith::Sampler::temperature(temperature, seed * 1000 + level * 100 + i),
                    pith::Stop{.max_tokens = thought_tokens, .stop_at_eos = false},
                    {},
                    0,
                    false});
    pith::ParallelStats st = pith::generate_parallel(bs);
    par.rounds += st.rounds;
    par.max_width = std::max(par.max_width, st.max_width);
    for (size_t i = 0; i < cands.size(); ++i) {
      if (bs[i].out.tokens.empty())
        return pith::Error(PITH_ERR_INTERNAL, "thought failed: " + bs[i].out.finish_reason);
      cands[i].score += bs[i].logprob / double(bs[i].out.tokens.size());
      cands[i].path.insert(cands[i].path.end(), bs[i].out.tokens.begin(), bs[i].out.tokens.end());
      ++evaluations;
    }
    // Keep the best `breadth` (sorting indices: a Context is moved only into fresh storage).
    std::vector<size_t> order(cands.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cands[a].score > cands[b].score; });
    std::vector<State> kept;
    for (size_t r = 0; r < order.size(); ++r) {
      State& c = cands[order[r]];
      if (r < breadth) {
        kept.push_back(static_cast<State&&>(c));
        continue;
      }
      ledger.branch(c.ctx);
      ledger.computed(c.ctx);
      ++pruned;
    }
    frontier = static_cast<std::vector<State>&&>(kept);
  }

  State& best = frontier[0];
  PITH_TRY(best.ctx.fill("\nAnswer:"));
  pith::Generation answer = best.ctx.generate(
      pith::Sampler::greedy(), pith::Stop{.max_tokens = answer_tokens, .stop_at_eos = false});
  for (State& s : frontier) {
    ledger.branch(s.ctx);
    ledger.computed(s.ctx);
  }
  PITH_TRY(pith::send(answer.text));
  pith::Json j;
  j.num("levels", depth)
      .num("forks", forks)
      .num("evaluations", evaluations)
      .num("pruned", pruned)
      .num("kept", double(frontier.size()))
      .num("shared_pages", shared_pages)
      .num("rounds", par.rounds)
      .num("max_width", par.max_width)
      .num("tokens_forwarded", double(ledger.forwarded))
      .num("branch_tokens", double(ledger.independent))
      .num("best_score", best.score)
      .raw("best_path", pith::Json::array(best.path))
      .raw("answer_tokens", pith::Json::array(answer.tokens));
  return pith::send(j.dump());
}
PITH_INFERLET(tree_of_thought)
