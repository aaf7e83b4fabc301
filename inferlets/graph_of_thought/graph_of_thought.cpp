// graph_of_thought: Graph of Thoughts (Besta et al. 2024): thoughts are vertices, operations add
// vertices and edges. Per round: Generate --thoughts children of the current best vertex (forks
// that decode together), Score them (mean token log-probability), Aggregate the best --merge of
// them into one thought (a join: a fork of the root that reads their tokens and writes a
// combination), Refine the aggregate --refine times (forks that decode together), and KeepBest.
//
//   graph_of_thought --prompt TEXT [--rounds 2] [--thoughts 3] [--merge 2] [--refine 2]
//                    [--thought-tokens 8] [--temperature 0.8] [--seed 1]
//
// Sends the best thought's text, then a JSON report: the graph (vertices with kind and score,
// edges), forks, joins, token accounting.
#include <algorithm>
#include <memory>
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/parallel.hpp>

namespace {

struct Vertex {
  std::string kind;  // root, generate, aggregate, refine
  std::vector<uint32_t> thought;
  double score = 0;
  std::unique_ptr<pith::Context> ctx;  // the context that ends with this thought
};

}  // namespace

pith::Status graph_of_thought(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "Sort the list 5 1 4 2 3.", "the problem");
  uint32_t rounds = flags.u32("--rounds", 2, "generate / aggregate / refine rounds");
  uint32_t n_thoughts = flags.u32("--thoughts", 3, "thoughts generated per round");
  uint32_t n_merge = flags.u32("--merge", 2, "best thoughts aggregated into one");
  uint32_t n_refine = flags.u32("--refine", 2, "refinements of each aggregate");
  uint32_t thought_tokens = flags.u32("--thought-tokens", 8, "tokens per thought");
  float temperature = flags.f32("--temperature", 0.8f, "sampling temperature");
  uint64_t seed = flags.u64("--seed", 1, "sampling seed");
  PITH_TRY(flags.done());
  if (n_merge < 1 || n_merge > n_thoughts)
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "need 1 <= --merge <= --thoughts", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context root = PITH_TRY(pith::Context::create(model));
  if (root.info().add_bos) root.fill_tokens({root.info().bos_token});
  PITH_TRY(root.fill(prompt));
  PITH_TRY(root.flush());

  std::vector<Vertex> g;
  std::vector<std::pair<size_t, size_t>> edges;
  g.push_back({"root", {}, 0, std::make_unique<pith::Context>(static_cast<pith::Context&&>(root))});
  pith::TokenLedger ledger;
  pith::ParallelStats par;
  uint32_t forks = 0, joins = 0, shared_pages = 0;

  // Forks `from` once per cue, decodes every fork together; returns the new vertices' indices.
  auto expand = [&](size_t from, const std::vector<std::string>& cues,
                    const std::string& kind) -> pith::Result<std::vector<size_t>> {
    std::vector<size_t> made;
    std::vector<pith::Branch> bs;
    for (size_t i = 0; i < cues.size(); ++i) {
      pith::Context kid = PITH_TRY(g[from].ctx->fork());
      ++forks;
      shared_pages += pith::shared_prefix_pages(*g[from].ctx, kid);
      PITH_TRY(kid.fill(cues[i]));
      g.push_back(
          {kind, {}, 0, std::make_unique<pith::Context>(static_cast<pith::Context&&>(kid))});
      edges.push_back({from, g.size() - 1});
      made.push_back(g.size() - 1);
    }
    for (size_t v : made)
      bs.push_back({g[v].ctx.get(),
                    pith::Sampler::temperature(temperature, seed++),
                    pith::Stop{.max_tokens = thought_tokens, .stop_at_eos = false},
                    {},
                    0,
                    false});
    pith::ParallelStats st = pith::generate_parallel(bs);
    par.rounds += st.rounds;
    par.max_width = std::max(par.max_width, st.max_width);
    for (size_t i = 0; i < made.size(); ++i) {
      g[made[i]].thought = bs[i].out.tokens;
      g[made[i]].score =
          bs[i].out.tokens.empty() ? -1e9 : bs[i].logprob / double(bs[i].out.tokens.size());
    }
    return made;
  };
  auto by_score = [&](std::vector<size_t> vs) {
    std::stable_sort(vs.begin(), vs.end(),
                     [&](size_t a, size_t b) { return g[a].score > g[b].score; });
    return vs;
  };

  size_t best = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    std::vector<std::string> cues;
    for (uint32_t i = 0; i < n_thoughts; ++i)
      cues.push_back("\nThought " + std::to_string(i + 1) + ":");
    std::vector<size_t> gen = by_score(PITH_TRY(expand(best, cues, "generate")));
    // Aggregate: the best n_merge thoughts flow into one new vertex (a join).
    std::vector<size_t> parts(gen.begin(), gen.begin() + n_merge);
    std::string cue = "\nCombine these:";
    size_t agg_ctx_from = 0;  // aggregates read their inputs on top of the root prompt
    pith::Context agg = PITH_TRY(g[agg_ctx_from].ctx->fork());
    ++forks;
    ++joins;
    shared_pages += pith::shared_prefix_pages(*g[agg_ctx_from].ctx, agg);
    PITH_TRY(agg.fill(cue));
    for (size_t p : parts) {
      PITH_TRY(agg.fill("\n-"));
      agg.fill_tokens(g[p].thought);
      edges.push_back({p, g.size()});
    }
    PITH_TRY(agg.fill("\nCombined:"));
    g.push_back(
        {"aggregate", {}, 0, std::make_unique<pith::Context>(static_cast<pith::Context&&>(agg))});
    size_t a = g.size() - 1;
    std::vector<pith::Branch> one{{g[a].ctx.get(),
                                   pith::Sampler::temperature(temperature, seed++),
                                   pith::Stop{.max_tokens = thought_tokens, .stop_at_eos = false},
                                   {},
                                   0,
                                   false}};
    pith::generate_parallel(one);
    g[a].thought = one[0].out.tokens;
    g[a].score =
        one[0].out.tokens.empty() ? -1e9 : one[0].logprob / double(one[0].out.tokens.size());
    // Refine the aggregate, then keep the best of it and its refinements.
    std::vector<std::string> rcues(n_refine, "\nImproved:");
    std::vector<size_t> ref = PITH_TRY(expand(a, rcues, "refine"));
    ref.push_back(a);
    best = by_score(ref)[0];
  }

  size_t joins_in = 0;
  std::string vertices = "[";
  for (size_t v = 0; v < g.size(); ++v) {
    ledger.computed(*g[v].ctx);
    bool leaf = std::none_of(edges.begin(), edges.end(), [&](auto& e) { return e.first == v; });
    if (leaf) ledger.branch(*g[v].ctx);
    pith::Json j;
    j.num("id", double(v))
        .str("kind", g[v].kind)
        .num("score", g[v].score)
        .num("tokens", double(g[v].thought.size()));
    vertices += (v ? "," : "") + j.dump();
    if (g[v].kind == "aggregate")
      joins_in += std::count_if(edges.begin(), edges.end(), [&](auto& e) { return e.second == v; });
  }
  vertices += "]";
  std::string edge_list = "[";
  for (size_t i = 0; i < edges.size(); ++i)
    edge_list += (i ? ",[" : "[") + std::to_string(edges[i].first) + "," +
                 std::to_string(edges[i].second) + "]";
  edge_list += "]";

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(g[best].thought))));
  pith::Json j;
  j.num("rounds", rounds)
      .num("forks", forks)
      .num("joins", joins)
      .num("join_inputs", double(joins_in))
      .num("shared_pages", shared_pages)
      .num("parallel_rounds", par.rounds)
      .num("max_width", par.max_width)
      .num("best", double(best))
      .num("tokens_forwarded", double(ledger.forwarded))
      .num("branch_tokens", double(ledger.independent))
      .raw("vertices", vertices)
      .raw("edges", edge_list)
      .raw("best_tokens", pith::Json::array(g[best].thought));
  return pith::send(j.dump());
}
PITH_INFERLET(graph_of_thought)
