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
#include <pith/context.hpp>
#include <pith/json.hpp>
#include <stdlib.h>

namespace {

int fail(const std::string& what, pith_status_t s) {
  pith::send("error: " + what + ": " + pith::status_name(s));
  return 1;
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string mode, name, prefix, suffix;
  uint32_t max_tokens = 8;
  bool bos = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--mode" && has) mode = args[++i];
    else if (a == "--name" && has) name = args[++i];
    else if (a == "--prefix" && has) prefix = args[++i];
    else if (a == "--suffix" && has) suffix = args[++i];
    else if (a == "--max-tokens" && has) max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--no-bos") bos = false;
    else return pith::send("error: unknown argument " + a), 2;
  }
  auto model = pith::Model::open("");
  if (!model) return fail("open model", model.status());

  if (mode == "remove") {
    if (pith_status_t s = pith::Context::remove_export(*model, name); s != PITH_OK) return fail("remove", s);
    pith::send(pith::Json().str("mode", "remove").dump());
    return 0;
  }

  pith::Result<pith::Context> ctx = pith::Result<pith::Context>::error(PITH_ERR_BAD_ARGUMENT);
  uint32_t reused = 0;
  if (mode == "import") {
    ctx = pith::Context::import_state(*model, name);
    if (!ctx) return fail("import '" + name + "'", ctx.status());
    reused = static_cast<uint32_t>(ctx->computed());
  } else if (mode == "export" || mode == "plain") {
    ctx = pith::Context::create(*model);
    if (!ctx) return fail("context", ctx.status());
    if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
    if (pith_status_t s = ctx->fill(prefix); s != PITH_OK) return fail("tokenize", s);
  } else {
    return pith::send("error: --mode must be export, import, plain or remove"), 2;
  }
  ctx->set_prefix_cache(false);

  pith::Json out;
  out.str("mode", mode);
  size_t prompt_tokens = ctx->tokens().size();
  if (mode == "export") {
    if (pith_status_t s = ctx->export_state(name); s != PITH_OK) return fail("export '" + name + "'", s);
  } else {
    if (pith_status_t s = ctx->fill(suffix); s != PITH_OK) return fail("tokenize", s);
    prompt_tokens = ctx->tokens().size();
    pith::Stop stop;
    stop.max_tokens = max_tokens;
    stop.stop_at_eos = false;  // fixed length: runs compare token by token
    pith::Generation g = ctx->generate(pith::Sampler::greedy(), stop);
    if (g.finish_reason != "length") return pith::send("error: generation ended: " + g.finish_reason), 1;
    out.str("text", g.text).raw("tokens", pith::Json::array(g.tokens));
  }
  // prompt_tokens = reused_tokens + prompt_tokens_computed when the reuse worked.
  out.num("prompt_tokens", double(prompt_tokens)).num("reused_tokens", reused);
  out.num("prompt_tokens_computed", ctx->prefilled_tokens()).num("forwarded_tokens", ctx->forwarded_tokens());
  pith::send(out.dump());
  return 0;
}
