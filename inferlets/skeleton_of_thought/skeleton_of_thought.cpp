// skeleton_of_thought: Skeleton-of-Thought (Ning et al. 2024). The model first writes a skeleton
// of --points short points in one context; then every point is expanded in its own fork of the
// skeleton context (sharing its KV pages), all expansions decoding side by side, and the answer
// is the points with their expansions, in order.
//
//   skeleton_of_thought --prompt TEXT [--points 3] [--point-tokens 4] [--expand-tokens 12]
//                       [--temperature 0.8] [--seed 1]
//
// Sends the assembled answer, then a JSON report (points, forks, parallel rounds, tokens).
#include <pith/flags.hpp>
#include <pith/json.hpp>
#include <pith/parallel.hpp>

int main() {
  pith::Flags f;
  std::string prompt = f.str("--prompt", "How can I improve my sleep?");
  uint32_t n_points = f.u32("--points", 3), point_tokens = f.u32("--point-tokens", 4),
           expand_tokens = f.u32("--expand-tokens", 12);
  float temperature = static_cast<float>(f.real("--temperature", 0.8));
  uint64_t seed = f.u64("--seed", 1);
  if (!f.unknown().empty()) return pith::send("error: unknown argument " + f.unknown()), 2;

  auto model = pith::Model::open("");
  auto skel = model ? pith::Context::create(*model) : pith::Result<pith::Context>::error(model.status());
  if (!skel) return pith::send(std::string("error: ") + pith::status_name(skel.status())), 1;
  if (skel->info().add_bos) skel->fill_tokens({skel->info().bos_token});
  skel->fill(prompt + "\nSkeleton:");

  // Stage 1: the skeleton, one point after the other in one context.
  pith::Sampler sampler = pith::Sampler::temperature(temperature, seed);
  std::vector<std::vector<uint32_t>> points;
  for (uint32_t i = 0; i < n_points; ++i) {
    skel->fill("\n" + std::to_string(i + 1) + ".");
    pith::Generation p = skel->generate(sampler, pith::Stop{.max_tokens = point_tokens, .stop_at_eos = false});
    if (p.tokens.empty()) return pith::send("error: skeleton: " + p.finish_reason), 1;
    points.push_back(p.tokens);
  }

  // Stage 2: one fork per point, all expanded together.
  auto kids = pith::fork_n(*skel, n_points);
  if (!kids) return pith::send(std::string("error: fork: ") + pith::status_name(kids.status())), 1;
  uint32_t shared_pages = 0;
  std::vector<pith::Branch> bs;
  for (uint32_t i = 0; i < n_points; ++i) {
    pith::Context& k = (*kids)[i];
    shared_pages += pith::shared_prefix_pages(*skel, k);
    k.fill("\nExpand point " + std::to_string(i + 1) + ":");
    bs.push_back({&k, pith::Sampler::temperature(temperature, seed + 1 + i),
                  pith::Stop{.max_tokens = expand_tokens, .stop_at_eos = false}, {}, 0, false});
  }
  pith::ParallelStats st = pith::generate_parallel(bs);

  // Aggregate: points and expansions in order.
  std::string answer;
  pith::TokenLedger ledger;
  ledger.computed(*skel);
  std::string expansions = "[";
  for (uint32_t i = 0; i < n_points; ++i) {
    if (bs[i].out.tokens.size() != expand_tokens) return pith::send("error: expansion: " + bs[i].out.finish_reason), 1;
    answer += std::to_string(i + 1) + "." + model->detokenize(points[i]).value_or("") + " " + bs[i].out.text + "\n";
    ledger.computed((*kids)[i]);
    ledger.branch((*kids)[i]);
    expansions += (i ? "," : "") + pith::Json::array(bs[i].out.tokens);
  }
  expansions += "]";
  std::string pts = "[";
  for (uint32_t i = 0; i < n_points; ++i) pts += (i ? "," : "") + pith::Json::array(points[i]);
  pts += "]";

  pith::send(answer);
  pith::Json j;
  j.num("points", n_points).num("forks", double(kids->size())).num("joins", 1).num("shared_pages", shared_pages)
      .num("rounds", st.rounds).num("max_width", st.max_width).num("steps", st.steps)
      .num("skeleton_tokens", double(skel->tokens().size())).num("tokens_forwarded", double(ledger.forwarded))
      .num("branch_tokens", double(ledger.independent)).raw("point_tokens", pts).raw("expansion_tokens", expansions);
  pith::send(j.dump());
  return 0;
}
