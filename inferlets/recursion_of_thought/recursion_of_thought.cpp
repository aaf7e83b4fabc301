// recursion_of_thought: Recursion of Thought (Lee and Kim 2023). A problem is split into
// --split subproblems; each subproblem is solved in its own context — a fork of the caller's, so
// it shares the caller's KV pages but its reasoning never enters the caller — recursively down to
// --depth, and only its answer is fed back into the caller's context (a join). Sibling
// subquestions, and sibling leaf answers, decode together.
//
//   recursion_of_thought --prompt TEXT [--split 2] [--depth 2] [--question-tokens 6]
//                        [--answer-tokens 6] [--temperature 0.8] [--seed 1]
//
// Sends the top-level answer text, then a JSON report (calls per depth, forks, joins, tokens).
#include <pith/inferlet.hpp>
#include <pith/json.hpp>
#include <pith/parallel.hpp>

namespace {

struct Solver {
  uint32_t split = 2, max_depth = 2, question_tokens = 6, answer_tokens = 6;
  float temperature = 0.8f;
  uint64_t seed = 1;
  std::vector<uint32_t> calls;  // per depth
  uint32_t forks = 0, joins = 0, shared_pages = 0, answer_tokens_fed_back = 0;
  pith::TokenLedger ledger;
  pith::ParallelStats par;

  pith::Sampler sampler() { return pith::Sampler::temperature(temperature, seed++); }
  pith::Stop stop(uint32_t n) { return pith::Stop{.max_tokens = n, .stop_at_eos = false}; }
  void note(const pith::ParallelStats& st) {
    par.rounds += st.rounds;
    if (st.max_width > par.max_width) par.max_width = st.max_width;
  }

  // Answers the problem whose statement ends `ctx` (pending or computed); returns the answer
  // tokens, which stay in ctx.
  pith::Result<std::vector<uint32_t>> solve(pith::Context& ctx, uint32_t depth) {
    if (calls.size() <= depth) calls.resize(depth + 1, 0);
    ++calls[depth];
    if (depth < max_depth) {
      // Pose the subproblems: forks of this context, their questions decoded side by side.
      std::vector<pith::Context> kids = PITH_TRY(pith::fork_n(ctx, split));
      forks += split;
      std::vector<pith::Branch> qs;
      for (uint32_t i = 0; i < split; ++i) {
        pith::Context& k = kids[i];
        shared_pages += pith::shared_prefix_pages(ctx, k);
        PITH_TRY(k.fill("\nSubproblem " + std::to_string(i + 1) + ":"));
        qs.push_back({&k, sampler(), stop(question_tokens), {}, 0, false});
      }
      note(pith::generate_parallel(qs));
      std::vector<std::vector<uint32_t>> sub_answers(split);
      if (depth + 1 == max_depth) {
        // Leaves: answer every subproblem at once.
        std::vector<pith::Branch> as;
        for (uint32_t i = 0; i < split; ++i) {
          PITH_TRY(kids[i].fill("\nAnswer:"));
          as.push_back({&kids[i], sampler(), stop(answer_tokens), {}, 0, false});
          if (calls.size() <= depth + 1) calls.resize(depth + 2, 0);
          ++calls[depth + 1];
        }
        note(pith::generate_parallel(as));
        for (uint32_t i = 0; i < split; ++i) sub_answers[i] = as[i].out.tokens;
      } else {
        for (uint32_t i = 0; i < split; ++i) sub_answers[i] = PITH_TRY(solve(kids[i], depth + 1));
      }
      for (pith::Context& k : kids) {
        ledger.branch(k);
        ledger.computed(k);
      }
      // Join: only the answers come back into this context.
      for (uint32_t i = 0; i < split; ++i) {
        PITH_TRY(ctx.fill("\nResult " + std::to_string(i + 1) + ":"));
        ctx.fill_tokens(sub_answers[i]);
        answer_tokens_fed_back += static_cast<uint32_t>(sub_answers[i].size());
        ++joins;
      }
    }
    PITH_TRY(ctx.fill("\nAnswer:"));
    pith::Generation g = ctx.generate(sampler(), stop(answer_tokens));
    if (g.tokens.size() != answer_tokens)
      return pith::Error(g.error ? g.error->code : PITH_ERR_INTERNAL, "answer: " + g.finish_reason);
    return g.tokens;
  }
};

}  // namespace

pith::Status recursion_of_thought(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "Compute 123 * 456 step by step.", "the problem");
  Solver s;
  s.split = flags.u32("--split", 2, "subproblems per problem");
  s.max_depth = flags.u32("--depth", 2, "levels of recursion");
  s.question_tokens = flags.u32("--question-tokens", 6, "tokens per subproblem statement");
  s.answer_tokens = flags.u32("--answer-tokens", 6, "tokens per answer");
  s.temperature = flags.f32("--temperature", 0.8f, "sampling temperature");
  s.seed = flags.u64("--seed", 1, "sampling seed");
  PITH_TRY(flags.done());

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context root = PITH_TRY(pith::Context::create(model));
  if (root.info().add_bos) root.fill_tokens({root.info().bos_token});
  PITH_TRY(root.fill(prompt));
  std::vector<uint32_t> answer = PITH_TRY(s.solve(root, 0));
  s.ledger.branch(root);
  s.ledger.computed(root);

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(answer))));
  pith::Json j;
  j.raw("calls_per_depth", pith::Json::array(s.calls))
      .num("forks", s.forks)
      .num("joins", s.joins)
      .num("answer_tokens_fed_back", s.answer_tokens_fed_back)
      .num("shared_pages", s.shared_pages)
      .num("rounds", s.par.rounds)
      .num("max_width", s.par.max_width)
      .num("root_tokens", double(root.tokens().size()))
      .num("tokens_forwarded", double(s.ledger.forwarded))
      .num("branch_tokens", double(s.ledger.independent))
      .raw("answer_tokens", pith::Json::array(answer));
  return pith::send(j.dump());
}
PITH_INFERLET(recursion_of_thought)
