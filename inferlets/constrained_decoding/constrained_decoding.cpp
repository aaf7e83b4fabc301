// constrained_decoding: generation that always parses under a grammar (GBNF, or the built-in
// JSON and arithmetic grammars). Each step restricts the model's next-token distribution to the
// grammar's mask (pith/constrained.hpp), so any model at any temperature produces valid output:
// greedy steps (and --top-k K) send the mask with the step and get the best allowed tokens back;
// sampling over every allowed token brings the whole vocabulary up.
//
//   constrained_decoding [--grammar json|json-object|arith] [--gbnf TEXT] [--prompt TEXT]
//                        [--max-tokens N] [--temperature T] [--top-k K] [--whole-vocabulary]
//                        [--seed S] [--no-bos]
//
// Messages: the generated text, then one JSON line of statistics:
//   {"tokens","sampled","forced","finish","vocab","excluded","trie_nodes","mask_us","allowed_mean","setup_ms"}
// (excluded: special tokens, from pith_vocab_special, that no grammar may produce).
#include <stdio.h>
#include <string.h>

#include <pith/constrained.hpp>
#include <pith/inferlet.hpp>

namespace {

// Integer arithmetic with + - * / and parentheses, single optional spaces around operators.
const char* kArithmetic = R"gbnf(root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= number | "(" ws expr ws ")"
number ::= "0" | [1-9] [0-9]{0,5}
ws     ::= " "?
)gbnf";

// The GBNF text of a named grammar, or "" for an unknown name.
std::string named_grammar(const std::string& name) {
  if (name == "json") return pith::grammar::json_gbnf();
  if (name == "json-object")
    return std::string("root ::= ws object ws\n") + strchr(pith::grammar::json_gbnf(), '\n');
  if (name == "arith") return kArithmetic;
  return "";
}

}  // namespace

pith::Status constrained_decoding(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "Output:", "the text before the constrained output");
  std::string name = flags.str("--grammar", "json", "json, json-object or arith");
  std::string gbnf = flags.str("--gbnf", "", "a grammar in GBNF (overrides --grammar)");
  pith::ConstrainedConfig cfg;
  cfg.max_tokens = flags.u32("--max-tokens", cfg.max_tokens,
                             "token budget (the grammar is completed at its end)");
  cfg.temperature =
      flags.f32("--temperature", cfg.temperature, "0 = greedy among the allowed tokens");
  cfg.top_k = flags.u32("--top-k", cfg.top_k,
                        "sample among the K best allowed tokens (0 = every allowed token)");
  cfg.whole_vocabulary = flags.flag("--whole-vocabulary",
                                    "mask the whole vocabulary here every step, greedy ones too");
  cfg.seed = flags.u64("--seed", cfg.seed, "sampling seed");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());
  if (gbnf.empty()) gbnf = named_grammar(name);
  if (gbnf.empty())
    return pith::Error(PITH_ERR_BAD_ARGUMENT,
                       "unknown grammar " + name + " (json, json-object, arith, or --gbnf TEXT)");

  const uint64_t t0 = pith::now_ns();
  pith::grammar::Grammar grammar;
  std::string err;
  if (!pith::grammar::Grammar::parse(gbnf, &grammar, &err))
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "grammar: " + err);
  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::TokenTrie trie = PITH_TRY(pith::vocabulary_trie(model));
  pith::grammar::Automaton automaton(grammar, trie);
  const double setup_ms = double(pith::now_ns() - t0) / 1e6;

  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));

  pith::ConstrainedGeneration g = pith::generate_constrained(ctx, automaton, cfg);
  PITH_TRY(pith::send(g.text));
  uint32_t excluded = 0;  // special (and empty) tokens no grammar can produce
  for (uint32_t id = 0; id < trie.vocab_size(); ++id) excluded += trie.usable(id) ? 0 : 1;
  char stats[512];
  const double steps = g.sampled ? double(g.sampled) : 1.0;
  snprintf(
      stats, sizeof stats,
      "{\"tokens\":%zu,\"sampled\":%u,\"forced\":%u,\"finish\":\"%s\",\"vocab\":%u,\"excluded\":%u,"
      "\"trie_nodes\":%u,\"mask_us\":%.1f,\"allowed_mean\":%.1f,\"setup_ms\":%.1f}",
      g.tokens.size(), g.sampled, g.forced, g.finish_reason.c_str(), trie.vocab_size(), excluded,
      trie.nodes(), double(g.mask_ns) / 1e3 / steps, double(g.allowed_total) / steps, setup_ms);
  PITH_TRY(pith::send(stats));
  if (g.error) return *g.error;
  if (g.finish_reason != "eos" && g.finish_reason != "budget" && g.finish_reason != "complete")
    return pith::Error(PITH_ERR_INTERNAL, "generation ended: " + g.finish_reason);
  return {};
}
PITH_INFERLET(constrained_decoding)
