// mcts: Monte-Carlo tree search over the next --depth tokens (beyond the paper). Every tree node
// owns a Context forked from its parent's (so the tree shares KV pages along each path); an
// iteration selects a leaf by PUCT, expands it with its --expand most likely tokens as priors,
// values it by a greedy rollout of --rollout tokens in a throw-away fork (value = exp of the
// rollout's mean token log-probability), and backs the value up the path (pith/mcts.hpp).
//
//   mcts --prompt TEXT [--iterations 24] [--expand 3] [--depth 4] [--rollout 4] [--c-puct 1.5]
//
// Sends the text of the most visited path, then a JSON report with the whole tree (per node:
// parent, token, prior, visits, value_sum, evals, eval_sum), so a client can check it.
#include <math.h>

#include <map>
#include <memory>
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/mcts.hpp>
#include <pith/parallel.hpp>

pith::Status mcts(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "The best opening move is", "the text to continue");
  uint32_t iterations =
      flags.u32("--iterations", 24, "select / expand / roll out / back up rounds");
  uint32_t n_expand = flags.u32("--expand", 3, "children per expanded node (the top tokens)");
  uint32_t max_depth = flags.u32("--depth", 4, "deepest node expanded");
  uint32_t rollout = flags.u32("--rollout", 4, "tokens of the greedy rollout that values a node");
  double c_puct = flags.real("--c-puct", 1.5, "exploration constant of PUCT");
  PITH_TRY(flags.done());
  if (rollout == 0 || n_expand == 0)
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--rollout and --expand must be positive", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context root = PITH_TRY(pith::Context::create(model));
  if (root.info().add_bos) root.fill_tokens({root.info().bos_token});
  PITH_TRY(root.fill(prompt));

  pith::MctsTree tree(c_puct);
  std::map<uint32_t, std::unique_ptr<pith::Context>>
      ctx;                                 // node -> its context (created on first visit)
  std::map<uint32_t, double> first_value;  // a node's value, once evaluated
  ctx[0] = std::make_unique<pith::Context>(static_cast<pith::Context&&>(root));
  pith::TokenLedger ledger;
  uint32_t node_forks = 0, rollout_forks = 0, shared_pages = 0;

  for (uint32_t it = 0; it < iterations; ++it) {
    std::vector<uint32_t> path = tree.select();
    uint32_t leaf = path.back();
    double value;
    if (auto seen = first_value.find(leaf); seen != first_value.end()) {
      value = seen->second;  // a terminal node selected again: its rollout is deterministic
    } else {
      if (!ctx.count(leaf)) {
        const pith::MctsNode& n = tree.node(leaf);
        pith::Context& parent = *ctx[static_cast<uint32_t>(n.parent)];
        pith::Context kid = PITH_TRY(parent.fork());
        ++node_forks;
        shared_pages += pith::shared_prefix_pages(parent, kid);
        kid.fill_tokens({n.token});
        ctx[leaf] = std::make_unique<pith::Context>(static_cast<pith::Context&&>(kid));
      }
      pith::Context& c = *ctx[leaf];
      pith::Distribution d = PITH_TRY(c.decode_step(n_expand > 256 ? n_expand : 256));
      if (tree.node(leaf).depth < max_depth) {
        std::vector<std::pair<uint32_t, float>> moves;
        for (size_t i = 0; i < d.ids.size() && i < n_expand; ++i)
          moves.push_back({d.ids[i], d.probs[i]});
        tree.expand(leaf, moves);
      }
      // Rollout: greedy continuation in a throw-away fork.
      pith::Context roll = PITH_TRY(c.fork());
      ++rollout_forks;
      shared_pages += pith::shared_prefix_pages(c, roll);
      roll.fill_tokens({d.ids[0]});
      double logprob = ::log(double(d.probs[0]));
      std::vector<pith::Branch> b{{&roll,
                                   pith::Sampler::greedy(),
                                   pith::Stop{.max_tokens = rollout - 1, .stop_at_eos = false},
                                   {},
                                   0,
                                   false}};
      if (rollout > 1) PITH_TRY(pith::generate_parallel_checked(b));
      logprob += b[0].logprob;
      value = ::exp(logprob / rollout);
      first_value[leaf] = value;
      ledger.computed(roll);
      ledger.branch(roll);
    }
    tree.backup(path, value);
  }

  std::string nodes = "[";
  for (size_t i = 0; i < tree.nodes().size(); ++i) {
    const pith::MctsNode& n = tree.nodes()[i];
    pith::Json j;
    j.num("id", double(i))
        .num("parent", n.parent)
        .num("token", n.token)
        .num("prior", n.prior)
        .num("depth", n.depth)
        .num("visits", n.visits)
        .num("value_sum", n.value_sum)
        .num("evals", n.evals)
        .num("eval_sum", n.eval_sum)
        .raw("children", pith::Json::array(n.children));
    nodes += (i ? "," : "") + j.dump();
  }
  nodes += "]";
  for (auto& [id, c] : ctx) ledger.computed(*c);

  std::vector<uint32_t> best = tree.best_path();
  PITH_TRY(pith::send(PITH_TRY(model.detokenize(best))));
  pith::Json j;
  j.num("iterations", iterations)
      .num("expansions", tree.expansions())
      .num("nodes", double(tree.nodes().size()))
      .num("root_visits", tree.node(0).visits)
      .num("node_forks", node_forks)
      .num("rollout_forks", rollout_forks)
      .num("forks", node_forks + rollout_forks)
      .num("shared_pages", shared_pages)
      .num("tokens_forwarded", double(ledger.forwarded))
      .num("branch_tokens", double(ledger.independent))
      .raw("best_path", pith::Json::array(best))
      .raw("tree", nodes);
  return pith::send(j.dump());
}
PITH_INFERLET(mcts)
