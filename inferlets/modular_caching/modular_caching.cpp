// modular_caching: Prompt Cache (Gim et al. 2024). A schema lays prompt modules out at fixed
// positions; each module is prefilled once, on its own (it attends only to itself), at its
// schema positions, and exported. A request then composes the modules it needs by importing
// their KV pages — gaps where unused modules would sit are fine, positions stay the schema's —
// and computes only its own new tokens.
//
//   modular_caching --prefill --cache NAME --module ID=TEXT...   prefill + export every module
//   modular_caching --cache NAME --use ID,ID... --question TEXT [--max-tokens 8] [--reference]
//
// The first module is the prelude (it starts with BOS) and every request includes it. With
// --reference nothing is imported: the same modules and question are computed in one forward
// whose explicit attention mask keeps every module to itself (the attention the composed run has)
// at the same positions, so the greedy output must match. Sends the text, then JSON: generated
// ids, tokens this run computed, tokens it imported.
#include <stdlib.h>

#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

struct Module {
  std::string id, text;
  uint32_t start = 0, len = 0;
};

// The schema lives in the store: "ID<TAB>START<TAB>LEN" per line, in schema order.
std::string schema_key(const std::string& cache) {
  return "modular_caching/" + cache + "/schema";
}
std::string export_name(const std::string& cache, const std::string& id) {
  return "modular_caching/" + cache + "/" + id;
}

std::vector<Module> load_schema(const std::string& cache) {
  std::vector<Module> out;
  std::string s = pith::store_get(schema_key(cache)).value_or("");
  for (size_t at = 0; at < s.size();) {
    size_t nl = s.find('\n', at), t1 = s.find('\t', at), t2 = s.find('\t', t1 + 1);
    if (nl == std::string::npos || t2 > nl) break;
    out.push_back({s.substr(at, t1 - at), "", static_cast<uint32_t>(atoi(s.c_str() + t1 + 1)),
                   static_cast<uint32_t>(atoi(s.c_str() + t2 + 1))});
    at = nl + 1;
  }
  return out;
}

pith::Result<std::vector<uint32_t>> module_tokens(const pith::Model& model,
                                                  const pith_model_info_t& info, size_t index,
                                                  const std::string& text) {
  std::vector<uint32_t> ids;
  if (index == 0 && info.add_bos) ids.push_back(info.bos_token);
  std::vector<uint32_t> t = PITH_TRY(model.tokenize(text));
  ids.insert(ids.end(), t.begin(), t.end());
  return ids;
}

pith::Status prefill(const pith::Model& model, const std::string& cache,
                     const std::vector<std::string>& specs) {
  std::string schema;
  uint32_t pos = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t eq = specs[i].find('=');
    if (eq == std::string::npos)
      return pith::Error(PITH_ERR_BAD_ARGUMENT, "--module wants ID=TEXT", 2);
    std::string id = specs[i].substr(0, eq);
    pith::Context ctx = PITH_TRY(pith::Context::create(model));
    ctx.set_prefix_cache(false);  // the prefix cache assumes positions 0..: a module has its own
    ctx.set_next_position(pos);
    std::vector<uint32_t> ids =
        PITH_TRY(module_tokens(model, ctx.info(), i, specs[i].substr(eq + 1)));
    ctx.fill_tokens(ids);
    PITH_TRY(ctx.export_state(export_name(cache, id)));
    schema += id + "\t" + std::to_string(pos) + "\t" + std::to_string(ids.size()) + "\n";
    pos += static_cast<uint32_t>(ids.size());
  }
  PITH_TRY(pith::store_set(schema_key(cache), schema));
  pith::Json j;
  j.num("modules", double(specs.size())).num("schema_end", pos);
  return pith::send(j.dump());
}

}  // namespace

pith::Status modular_caching(pith::Flags& flags) {
  bool do_prefill = flags.flag("--prefill", "prefill and export the --module texts (once)");
  bool reference =
      flags.flag("--reference", "recompute the modules with the same mask (the check)");
  std::string cache = flags.str("--cache", "default", "the module cache's name");
  std::string use = flags.str("--use", "", "modules to compose after the prelude, comma-separated");
  std::string question = flags.str("--question", "Summarize:", "the text after the modules");
  uint32_t max_tokens = flags.u32("--max-tokens", 8, "tokens to generate");
  std::vector<std::string> specs =
      flags.all("--module", "ID=TEXT, a module to prefill (the first is the prelude)");
  PITH_TRY(flags.done());
  pith::Model model = PITH_TRY(pith::Model::open(""));
  if (do_prefill) return prefill(model, cache, specs);

  // The modules to compose: the prelude, then --use in schema order.
  std::vector<Module> schema = load_schema(cache);
  if (schema.empty())
    return pith::Error(PITH_ERR_NOT_FOUND,
                       "no schema for cache " + cache + " (run --prefill first)");
  std::vector<const Module*> chosen{&schema[0]};
  for (size_t i = 1; i < schema.size(); ++i)
    if (("," + use + ",").find("," + schema[i].id + ",") != std::string::npos)
      chosen.push_back(&schema[i]);
  const uint32_t schema_end = schema.back().start + schema.back().len;

  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(false);
  uint32_t imported = 0;
  pith::Result<pith::Distribution> d = pith::Error(PITH_ERR_INTERNAL, "no step ran");
  std::vector<uint32_t> q_ids = PITH_TRY(model.tokenize(question));
  if (q_ids.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty question", 2);
  if (!reference) {
    for (const Module* m : chosen) {
      PITH_TRY(ctx.import_append(export_name(cache, m->id)));
      imported += m->len;
    }
    ctx.set_next_position(schema_end);
    ctx.fill_tokens(q_ids);
    d = ctx.decode_step(1);
  } else {
    // Same tokens and positions, recomputed here: modules see only themselves, the question
    // sees every module and itself (causally).
    std::vector<std::pair<size_t, size_t>> spans;  // slot ranges of the modules
    for (const Module* m : chosen) {
      pith::Result<pith::Context> exp =
          pith::Context::import_state(model, export_name(cache, m->id));
      if (!exp) return pith::Error(exp.status(), "module " + m->id + " not found");
      ctx.set_next_position(m->start);
      spans.push_back({ctx.tokens().size(), ctx.tokens().size() + m->len});
      ctx.fill_tokens(exp->tokens());
    }
    const size_t q0 = ctx.tokens().size();
    ctx.set_next_position(schema_end);
    ctx.fill_tokens(q_ids);
    const size_t n = ctx.tokens().size();
    pith::AttentionMask mask(n, n);
    for (auto [b, e] : spans)
      for (size_t r = b; r < e; ++r) mask.allow(r, b, r + 1);
    for (size_t r = q0; r < n; ++r) mask.allow(r, 0, r + 1);
    d = ctx.decode_step(1, mask);
  }
  std::vector<uint32_t> out;
  while (d) {
    out.push_back(d->ids[0]);
    if (out.size() == max_tokens) break;
    ctx.fill_tokens({d->ids[0]});
    d = ctx.decode_step(1);
  }
  if (out.size() != max_tokens) return d.error().context("decode");

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(out))));
  pith::Json j;
  std::string used;
  for (const Module* m : chosen) used += (used.empty() ? "" : ",") + m->id;
  j.str("modules", used)
      .num("imported_tokens", imported)
      .num("question_tokens", double(q_ids.size()))
      .num("computed_tokens", ctx.forwarded_tokens())
      .num("context_slots", double(ctx.tokens().size()))
      .raw("tokens", pith::Json::array(out));
  return pith::send(j.dump());
}
PITH_INFERLET(modular_caching)
