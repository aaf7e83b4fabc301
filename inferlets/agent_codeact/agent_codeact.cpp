// agent_codeact: a CodeAct agent (Wang et al. 2024): each turn the model thinks, its action is
// JavaScript, the inferlet runs that code in an embedded engine (Duktape, compiled into this
// Wasm module) and feeds the result back into the same KV context as an observation — no
// round trip to a client, no re-prefill.
//
//   agent_codeact [--task TEXT] [--turns 2] [--think-tokens 8] [--answer-tokens 8]
//                 [--code TEMPLATE] [--seed 1]
//
// The tiny test models write no JavaScript, so the action is a code template filled with what
// the model generated: "{ids}" becomes the JS array of the turn's thought token ids and "{text}"
// a JS string literal of its text (bytes outside printable ASCII as \xNN escapes, so any bytes
// make a valid literal). The default template hashes the ids (h = (h * 31 + id) % 1000003, a
// value a client can recompute); --code supplies another. A JavaScript error becomes the
// observation "Error: ..." and the agent goes on (see README: how errors work without setjmp in
// wasm32). Sends the final answer text, then a JSON report with every turn (thought ids, code,
// result, context size before/after).
#include <duktape.h>
#include <stdlib.h>

#include <pith/inferlet.hpp>
#include <pith/json.hpp>

namespace {

const char* kDefaultCode =
    "var ids = {ids}; var h = 0;\n"
    "for (var i = 0; i < ids.length; i++) h = (h * 31 + ids[i]) % 1000003;\n"
    "'checksum ' + h;";

struct Agent {
  pith::Model model;
  pith::Context ctx;
  std::string task, code_template;
  uint32_t turns = 2, think_tokens = 8, answer_tokens = 8, turn = 0, errors = 0;
  uint64_t seed = 1;
  std::vector<uint32_t> thought;  // the current turn's thought tokens
  std::string code;               // the current turn's action
  std::string report;             // JSON objects of the finished turns, comma-separated
};
// The fatal handler's way back to the agent (Duktape gives it no state of ours).
Agent* g_agent = nullptr;

// The turns run outside the entry function (Duktape's error handler re-enters them), so a
// failed SDK call ends the instance here, reported as the entry point reports it.
void must(pith::Status s) {
  if (!s) exit(pith::report_error(s.error()));
}

[[noreturn]] void run_turns();

// A turn's result goes into the context as an observation.
void observe(const std::string& result, bool error) {
  Agent& a = *g_agent;
  size_t before = a.ctx.tokens().size();
  std::string obs = "\nObservation: " + result;
  must(a.ctx.fill(obs));
  pith::Json j;
  j.num("turn", a.turn)
      .raw("thought", pith::Json::array(a.thought))
      .str("code", a.code)
      .str("result", result)
      .boolean("error", error)
      .str("observation", obs)
      .num("context_before", double(before))
      .num("context_after", double(a.ctx.tokens().size()));
  a.report += (a.report.empty() ? "" : ",") + j.dump();
  ++a.turn;
}

// Duktape's fatal handler, reached for every uncaught JavaScript error (duk_wasm_prelude.h). It
// must not return: the agent carries on from here, leaving the evaluation's frames (and its
// Duktape heap) abandoned below — bounded by the number of turns.
void on_js_error(void*, const char* msg) {
  ++g_agent->errors;
  observe(std::string("Error: ") + (msg ? msg : "unknown"), true);
  run_turns();
}

std::string eval_js(const std::string& code) {
  duk_context* js = duk_create_heap(nullptr, nullptr, nullptr, nullptr, on_js_error);
  if (!js) return "Error: no JavaScript heap";
  duk_peval_lstring(js, code.data(), code.size());
  std::string result = duk_safe_to_string(js, -1);
  duk_destroy_heap(js);
  return result;
}

// A JavaScript string literal holding `text`'s bytes: printable ASCII other than the quote and
// the backslash as is, every other byte as \xNN (a character code 0-255).
std::string js_string(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

void replace_all(std::string& s, const std::string& key, const std::string& value) {
  for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
    s.replace(at, key.size(), value);
}

std::string fill_template(const std::string& tmpl, const pith::Generation& thought) {
  std::string out = tmpl;
  replace_all(out, "{ids}", "[" + pith::join(thought.tokens, ",") + "]");
  replace_all(out, "{text}", js_string(thought.text));
  return out;
}

[[noreturn]] void finish() {
  Agent& a = *g_agent;
  must(a.ctx.fill("\nFinal answer:"));
  pith::Generation g = a.ctx.generate(
      pith::Sampler::greedy(), pith::Stop{.max_tokens = a.answer_tokens, .stop_at_eos = false});
  must(pith::send(g.text));
  pith::Json j;
  j.num("turns", a.turn)
      .num("errors", a.errors)
      .num("context_tokens", double(a.ctx.tokens().size()))
      .num("computed_tokens", a.ctx.forwarded_tokens())
      .raw("answer_tokens", pith::Json::array(g.tokens))
      .raw("steps", "[" + a.report + "]");
  must(pith::send(j.dump()));
  exit(0);  // also the way out of an error continuation: never return into Duktape
}

[[noreturn]] void run_turns() {
  Agent& a = *g_agent;
  while (a.turn < a.turns) {
    must(a.ctx.fill("\nThought:"));
    pith::Generation g =
        a.ctx.generate(pith::Sampler::temperature(0.8f, a.seed + a.turn),
                       pith::Stop{.max_tokens = a.think_tokens, .stop_at_eos = false});
    a.thought = g.tokens;
    a.code = fill_template(a.code_template, g);
    must(a.ctx.fill("\nCode:\n" + a.code));
    observe(eval_js(a.code), false);
  }
  finish();
}

}  // namespace

pith::Status agent_codeact(pith::Flags& flags) {
  std::string task =
      flags.str("--task", "Compute a checksum of your thoughts with JavaScript.", "the task");
  std::string code_template =
      flags.str("--code", kDefaultCode,
                "the action's JavaScript; {ids} = the thought's token ids, {text} its text");
  uint32_t turns = flags.u32("--turns", 2, "thought / code / observation turns");
  uint32_t think_tokens = flags.u32("--think-tokens", 8, "tokens per thought");
  uint32_t answer_tokens = flags.u32("--answer-tokens", 8, "tokens of the final answer");
  uint64_t seed = flags.u64("--seed", 1, "sampling seed of the thoughts");
  PITH_TRY(flags.done());
  pith::Model model = PITH_TRY(pith::Model::open(""));
  Agent a{.model = model,
          .ctx = PITH_TRY(pith::Context::create(model)),
          .task = task,
          .code_template = code_template};
  a.turns = turns;
  a.think_tokens = think_tokens;
  a.answer_tokens = answer_tokens;
  a.seed = seed;
  if (a.ctx.info().add_bos) a.ctx.fill_tokens({a.ctx.info().bos_token});
  PITH_TRY(a.ctx.fill("You solve tasks by writing JavaScript.\nTask: " + a.task));
  g_agent = &a;
  run_turns();  // ends the instance itself (finish), after the last turn
}
PITH_INFERLET(agent_codeact)
