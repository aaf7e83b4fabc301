// agent_react: generation that stops mid-way to call a tool over HTTP and goes on in the same
// context (paper R3, I/O inside the inferlet). The KV cache is kept across the call: the tool's
// answer is appended as pending tokens and computed by the next decode step together with the
// last generated token, so nothing is ever computed twice.
//
//   agent_react --prompt TEXT --tool-url URL --call-at N[,N...] [--max-tokens M] [--no-bos]
//
// The tiny test models produce no meaningful text, so the calls happen at fixed points: after
// N generated tokens for each N of --call-at (ReAct's "Action:" detection would go there). Each
// call POSTs {"call":I,"query":TEXT} (TEXT = the tokens generated since the previous call) and
// appends "\nObservation: <response body>\n" to the context. Generation is greedy.
//
// Sends one JSON message: {"transcript", "tool_calls", "observations":[...], "generated_tokens",
// "generated_ids", "context_tokens", "computed_tokens", "forwarded_tokens", "cached_tokens",
// "prompt_tokens"}: forwarded + cached (by the server's prefix cache) == computed shows that no
// token was computed twice; prompt_tokens counts the prompt and every observation (the tokens
// that did not come from the model).
#include <stdlib.h>

#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

std::vector<uint32_t> parse_points(const std::string& s) {
  std::vector<uint32_t> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(static_cast<uint32_t>(atoi(s.substr(at, comma - at).c_str())));
    at = comma + 1;
  }
  return out;
}

}  // namespace

pith::Status agent_react(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the task");
  std::string tool_url = flags.str("--tool-url", "", "the tool's HTTP endpoint (required)");
  std::vector<uint32_t> call_at = parse_points(
      flags.str("--call-at", "", "call the tool after these generated-token counts (e.g. 2,5)"));
  uint32_t max_tokens = flags.u32("--max-tokens", 16, "tokens to generate");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  PITH_TRY(flags.done());
  if (tool_url.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "--tool-url is required", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  size_t prompt_tokens = ctx.tokens().size();

  std::string transcript = prompt;
  std::vector<std::string> observations;
  std::vector<uint32_t> since_call;  // generated since the previous tool call
  std::vector<uint32_t> generated_ids;
  uint32_t generated = 0;
  size_t next_call = 0;
  for (;;) {
    if (next_call < call_at.size() && call_at[next_call] == generated) {
      ++next_call;
      std::string query = PITH_TRY(model.detokenize(since_call));
      std::string body =
          pith::Json().num("call", double(observations.size() + 1)).str("query", query).dump();
      // The instance parks here; the server keeps its KV pages and runs other inferlets.
      pith::Result<pith::HttpResponse> r = pith::http_post(tool_url, body);
      if (!r) return r.error().context("tool call " + tool_url);
      if (r->status != 200)
        return pith::Error(PITH_ERR_INTERNAL, "tool answered HTTP " + std::to_string(r->status));
      std::string obs = "\nObservation: " + r->body + "\n";
      size_t before = ctx.tokens().size();
      PITH_TRY(ctx.fill(obs));
      prompt_tokens += ctx.tokens().size() - before;
      observations.push_back(r->body);
      transcript += obs;
      since_call.clear();
    }
    if (generated == max_tokens) break;
    pith::Distribution d = PITH_TRY(ctx.decode_step(1));
    uint32_t tok = d.ids[0];
    ctx.fill_tokens({tok});
    since_call.push_back(tok);
    generated_ids.push_back(tok);
    transcript += PITH_TRY(model.detokenize({tok}));
    ++generated;
  }

  std::string obs_json = "[";
  for (size_t i = 0; i < observations.size(); ++i)
    obs_json += (i ? "," : "") + pith::Json::quote(observations[i]);
  obs_json += "]";
  pith::Json out;
  out.str("transcript", transcript)
      .num("tool_calls", double(observations.size()))
      .raw("observations", obs_json);
  out.num("generated_tokens", generated).raw("generated_ids", pith::Json::array(generated_ids));
  out.num("context_tokens", double(ctx.tokens().size()))
      .num("computed_tokens", double(ctx.computed()));
  out.num("forwarded_tokens", ctx.forwarded_tokens()).num("cached_tokens", ctx.cached_tokens());
  out.num("prompt_tokens", double(prompt_tokens));
  return pith::send(out.dump());
}
PITH_INFERLET(agent_react)
