// prefix_caching: explicit KV reuse across inferlets (paper R1). One run computes a shared
// prefix and exports its KV pages under a name; later runs import them and compute only their
// own suffix. The server's automatic prefix cache is switched off in this inferlet, so every
// saved token is the export's doing.
//
//   prefix_caching --mode export --name N --prefix TEXT            compute + export the prefix
//   prefix_caching --mode import --name N --suffix TEXT [--max-tokens M]
//                                                  import, append the suffix, generate greedily
//   prefix_caching --mode plain --prefix TEXT --suffix TEXT [--max-tokens M]
//                                                  the same generation without reuse
//   prefix_caching --mode remove --name N          withdraw the export
//   [--no-bos]
//
// Sends one JSON message: {"mode", "prompt_tokens", "reused_tokens", "prompt_tokens_computed"
// (prompt tokens this run computed itself; a suffix of one token counts 0: it is a decode step),
// "forwarded_tokens" (every token it computed), "text", "tokens"} (export: no text/tokens).
#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

// The context a run starts from: the imported state, or a fresh one holding the prefix.
pith::Result<pith::Context> start(const pith::Model& model, const std::string& mode,
                                  const std::string& name, const std::string& prefix, bool bos) {
  if (mode == "import") return pith::Context::import_state(model, name);
  if (mode != "export" && mode != "plain")
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--mode must be export, import, plain or remove", 2);
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prefix));
  return ctx;
}

}  // namespace

pith::Status prefix_caching(pith::Flags& flags) {
  std::string mode = flags.str("--mode", "", "export, import, plain or remove");
  std::string name = flags.str("--name", "", "the exported state's name");
  std::string prefix = flags.str("--prefix", "", "the shared prefix (export, plain)");
  std::string suffix = flags.str("--suffix", "", "the text after the prefix (import, plain)");
  uint32_t max_tokens = flags.u32("--max-tokens", 8, "tokens to generate");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());
  pith::Model model = PITH_TRY(pith::Model::open(""));

  if (mode == "remove") {
    PITH_TRY(pith::Context::remove_export(model, name));
    return pith::send(pith::Json().str("mode", "remove").dump());
  }

  pith::Context ctx = PITH_TRY(start(model, mode, name, prefix, bos));
  const uint32_t reused = mode == "import" ? static_cast<uint32_t>(ctx.computed()) : 0;
  ctx.set_prefix_cache(false);

  pith::Json out;
  out.str("mode", mode);
  size_t prompt_tokens = ctx.tokens().size();
  if (mode == "export") {
    PITH_TRY(ctx.export_state(name));
  } else {
    PITH_TRY(ctx.fill(suffix));
    prompt_tokens = ctx.tokens().size();
    pith::Stop stop;
    stop.max_tokens = max_tokens;
    stop.stop_at_eos = false;  // fixed length: runs compare token by token
    pith::Generation g = ctx.generate(pith::Sampler::greedy(), stop);
    if (g.finish_reason != "length")
      return pith::Error(PITH_ERR_INTERNAL, "generation ended: " + g.finish_reason);
    out.str("text", g.text).raw("tokens", pith::Json::array(g.tokens));
  }
  // prompt_tokens = reused_tokens + prompt_tokens_computed when the reuse worked.
  out.num("prompt_tokens", double(prompt_tokens)).num("reused_tokens", reused);
  out.num("prompt_tokens_computed", ctx.prefilled_tokens())
      .num("forwarded_tokens", ctx.forwarded_tokens());
  return pith::send(out.dump());
}
PITH_INFERLET(prefix_caching)
