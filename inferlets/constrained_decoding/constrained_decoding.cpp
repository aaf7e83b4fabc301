// constrained_decoding: generation that always parses under a grammar (GBNF, or the built-in
// JSON and arithmetic grammars). Each step masks the model's full-vocabulary distribution with
// the grammar (pith/constrained.hpp), so any model at any temperature produces valid output.
//
//   constrained_decoding [--grammar json|json-object|arith] [--gbnf TEXT] [--prompt TEXT] [--max-tokens N]
//                        [--temperature T] [--seed S] [--no-bos]
//
// Messages: the generated text, then one JSON line of statistics:
//   {"tokens","sampled","forced","finish","vocab","excluded","trie_nodes","mask_us","allowed_mean","setup_ms"}
// (excluded: special tokens, from pith_vocab_special, that no grammar may produce).
#include <pith/constrained.hpp>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

// Integer arithmetic with + - * / and parentheses, single optional spaces around operators.
const char* kArithmetic = R"gbnf(root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= number | "(" ws expr ws ")"
number ::= "0" | [1-9] [0-9]{0,5}
ws     ::= " "?
)gbnf";

int fail(const std::string& why) {
  pith::send("error: " + why);
  return 1;
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt = "Output:", gbnf = pith::grammar::json_gbnf();
  pith::ConstrainedConfig cfg;
  bool bos = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--grammar" && has) {
      const std::string& name = args[++i];
      if (name == "json") gbnf = pith::grammar::json_gbnf();
      else if (name == "json-object") gbnf = std::string("root ::= ws object ws\n") + strchr(pith::grammar::json_gbnf(), '\n');
      else if (name == "arith") gbnf = kArithmetic;
      else return fail("unknown grammar " + name + " (json, json-object, arith, or --gbnf TEXT)");
    } else if (a == "--gbnf" && has) gbnf = args[++i];
    else if (a == "--max-tokens" && has) cfg.max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--temperature" && has) cfg.temperature = static_cast<float>(atof(args[++i].c_str()));
    else if (a == "--seed" && has) cfg.seed = strtoull(args[++i].c_str(), nullptr, 10);
    else if (a == "--no-bos") bos = false;
    else return fail("unknown argument " + a);
  }

  const uint64_t t0 = pith::now_ns();
  pith::grammar::Grammar grammar;
  std::string err;
  if (!pith::grammar::Grammar::parse(gbnf, &grammar, &err)) return fail("grammar: " + err);
  auto model = pith::Model::open("");
  if (!model) return fail(pith::status_name(model.status()));
  auto trie = pith::vocabulary_trie(*model);
  if (!trie) return fail(std::string("vocabulary: ") + pith::status_name(trie.status()));
  pith::grammar::Automaton automaton(grammar, *trie);
  const double setup_ms = double(pith::now_ns() - t0) / 1e6;

  auto ctx = pith::Context::create(*model);
  if (!ctx) return fail(pith::status_name(ctx.status()));
  if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  if (pith_status_t s = ctx->fill(prompt); s != PITH_OK) return fail(pith::status_name(s));

  pith::ConstrainedGeneration g = pith::generate_constrained(*ctx, automaton, cfg);
  pith::send(g.text);
  uint32_t excluded = 0;  // special (and empty) tokens no grammar can produce
  for (uint32_t id = 0; id < trie->vocab_size(); ++id) excluded += trie->usable(id) ? 0 : 1;
  char stats[512];
  const double steps = g.sampled ? double(g.sampled) : 1.0;
  snprintf(stats, sizeof stats,
           "{\"tokens\":%zu,\"sampled\":%u,\"forced\":%u,\"finish\":\"%s\",\"vocab\":%u,\"excluded\":%u,"
           "\"trie_nodes\":%u,\"mask_us\":%.1f,\"allowed_mean\":%.1f,\"setup_ms\":%.1f}",
           g.tokens.size(), g.sampled, g.forced, g.finish_reason.c_str(), trie->vocab_size(), excluded, trie->nodes(),
           double(g.mask_ns) / 1e3 / steps, double(g.allowed_total) / steps, setup_ms);
  pith::send(stats);
  return g.finish_reason == "eos" || g.finish_reason == "budget" || g.finish_reason == "complete" ? 0 : 1;
}
