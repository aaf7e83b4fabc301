// skeleton_of_thought: Skeleton-of-Thought (Ning et al. 2024). The model first writes a skeleton
// of --points short points in one context; then every point is expanded in its own fork of the
// skeleton context (sharing its KV pages), all expansions decoding side by side, and the answer
// is the points with their expansions, in order.
//
//   skeleton_of_thought --prompt TEXT [--points 3] [--point-tokens 4] [--expand-tokens 12]
//                       [--temperature 0.8] [--seed 1]
//
// Sends the assembled answer, then a JSON report (points, forks, parallel rounds, tokens).
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/parallel.hpp>

pith::Status skeleton_of_thought(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "How can I improve my sleep?", "the question");
  uint32_t n_points = flags.u32("--points", 3, "points of the skeleton");
  uint32_t point_tokens = flags.u32("--point-tokens", 4, "tokens per skeleton point");
  uint32_t expand_tokens = flags.u32("--expand-tokens", 12, "tokens per expanded point");
  float temperature = flags.f32("--temperature", 0.8f, "sampling temperature");
  uint64_t seed = flags.u64("--seed", 1, "sampling seed");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context skel = PITH_TRY(pith::Context::create(model));
  if (skel.info().add_bos) skel.fill_tokens({skel.info().bos_token});
  PITH_TRY(skel.fill(prompt + "\nSkeleton:"));

  // Stage 1: the skeleton, one point after the other in one context.
  pith::Sampler sampler = pith::Sampler::temperature(temperature, seed);
  std::vector<std::vector<uint32_t>> points;
  for (uint32_t i = 0; i < n_points; ++i) {
    PITH_TRY(skel.fill("\n" + std::to_string(i + 1) + "."));
    pith::Generation p =
        skel.generate(sampler, pith::Stop{.max_tokens = point_tokens, .stop_at_eos = false});
    if (p.tokens.empty()) return pith::Error(PITH_ERR_INTERNAL, "skeleton: " + p.finish_reason);
    points.push_back(p.tokens);
  }

  // Stage 2: one fork per point, all expanded together.
  std::vector<pith::Context> kids = PITH_TRY(pith::fork_n(skel, n_points));
  uint32_t shared_pages = 0;
  std::vector<pith::Branch> bs;
  for (uint32_t i = 0; i < n_points; ++i) {
    pith::Context& k = kids[i];
    shared_pages += pith::shared_prefix_pages(skel, k);
    PITH_TRY(k.fill("\nExpand point " + std::to_string(i + 1) + ":"));
    bs.push_back({&k,
                  pith::Sampler::temperature(temperature, seed + 1 + i),
                  pith::Stop{.max_tokens = expand_tokens, .stop_at_eos = false},
                  {},
                  0,
                  false});
  }
  pith::ParallelStats st = pith::generate_parallel(bs);

  // Aggregate: points and expansions in order.
  std::string answer;
  pith::TokenLedger ledger;
  ledger.computed(skel);
  std::string expansions = "[";
  for (uint32_t i = 0; i < n_points; ++i) {
    if (bs[i].out.tokens.size() != expand_tokens)
      return pith::Error(PITH_ERR_INTERNAL, "expansion: " + bs[i].out.finish_reason);
    answer += std::to_string(i + 1) + "." + PITH_TRY(model.detokenize(points[i])) + " " +
              bs[i].out.text + "\n";
    ledger.computed(kids[i]);
    ledger.branch(kids[i]);
    expansions += (i ? "," : "") + pith::Json::array(bs[i].out.tokens);
  }
  expansions += "]";
  std::string pts = "[";
  for (uint32_t i = 0; i < n_points; ++i) pts += (i ? "," : "") + pith::Json::array(points[i]);
  pts += "]";

  PITH_TRY(pith::send(answer));
  pith::Json j;
  j.num("points", n_points)
      .num("forks", double(kids.size()))
      .num("joins", 1)
      .num("shared_pages", shared_pages)
      .num("rounds", st.rounds)
      .num("max_width", st.max_width)
      .num("steps", st.steps)
      .num("skeleton_tokens", double(skel.tokens().size()))
      .num("tokens_forwarded", double(ledger.forwarded))
      .num("branch_tokens", double(ledger.independent))
      .raw("point_tokens", pts)
      .raw("expansion_tokens", expansions);
  return pith::send(j.dump());
}
PITH_INFERLET(skeleton_of_thought)
