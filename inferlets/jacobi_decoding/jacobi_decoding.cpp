// jacobi_decoding: greedy decoding as a parallel fixed-point iteration (Santilli et al. 2023).
// A window of --window guessed tokens follows the last committed token; one forward computes
// the greedy token after every window position at once (Context::decode_all). Greedy decoding
// is the fixed point y_i = argmax p(. | prefix, y_1..y_i-1): the leading guesses that already
// equal their updates are final and committed together with the first update after them, the
// remaining updates become the next iteration's guesses, and the K/V of wrong guesses is rolled
// back (Context::truncate). Each iteration commits at least one token, so iterations <= tokens,
// and the output is exactly greedy decoding's.
//
//   jacobi_decoding --prompt TEXT [--max-tokens N] [--window W] [--no-bos] [--no-prefix-cache]
//
// Messages: the generated text, the token ids (comma-separated), then one JSON line:
//   {"tokens","iterations","forward_calls","finish"}   (forward_calls = iterations + the prefill)
#include <pith/context.hpp>
#include <stdio.h>
#include <stdlib.h>

namespace {

int fail(const std::string& why) {
  pith::send("error: " + why);
  return 1;
}

}  // namespace

int main() {
  std::vector<std::string> args = pith::args();
  std::string prompt;
  uint32_t max_tokens = 64, window = 6;
  bool bos = true, prefix_cache = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has = i + 1 < args.size();
    if (a == "--prompt" && has) prompt = args[++i];
    else if (a == "--max-tokens" && has) max_tokens = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--window" && has) window = static_cast<uint32_t>(atoi(args[++i].c_str()));
    else if (a == "--no-bos") bos = false;
    else if (a == "--no-prefix-cache") prefix_cache = false;
    else return fail("unknown argument " + a);
  }
  if (max_tokens == 0) return fail("--max-tokens must be at least 1");

  auto model = pith::Model::open("");
  if (!model) return fail(pith::status_name(model.status()));
  auto ctx = pith::Context::create(*model);
  if (!ctx) return fail(pith::status_name(ctx.status()));
  ctx->set_prefix_cache(prefix_cache);
  if (bos && ctx->info().add_bos) ctx->fill_tokens({ctx->info().bos_token});
  if (pith_status_t s = ctx->fill(prompt); s != PITH_OK) return fail(pith::status_name(s));
  const uint32_t eos = ctx->info().eos_token;

  auto first = ctx->decode_step(1);
  if (!first) return fail(pith::status_name(first.status()));
  uint32_t next = first->ids[0];
  std::vector<uint32_t> guess(window, next);  // the initial guesses: the first token repeated
  std::vector<uint32_t> out;
  uint32_t iterations = 0;
  std::string finish = "length";
  for (;;) {
    out.push_back(next);
    if (next == eos) finish = "eos";
    if (next == eos || out.size() >= max_tokens) break;
    ctx->fill_tokens({next});
    const size_t base = ctx->tokens().size();
    if (guess.size() > max_tokens - out.size()) guess.resize(max_tokens - out.size());
    ctx->fill_tokens(guess);
    auto upd = ctx->decode_all(1);  // upd[i]: the greedy token after input i (next, guesses...)
    ++iterations;
    if (!upd || upd->size() != guess.size() + 1) return fail(pith::status_name(upd.status()));
    size_t k = 0;  // guesses that are already fixed points
    bool stop = false;
    while (k < guess.size() && (*upd)[k].ids[0] == guess[k]) {
      out.push_back(guess[k++]);
      if (out.back() == eos || out.size() >= max_tokens) {
        stop = true;
        break;
      }
    }
    if (stop) {
      if (out.back() == eos) finish = "eos";
      break;
    }
    ctx->truncate(base + k);
    next = (*upd)[k].ids[0];
    // The updates after the committed ones are the next guesses (computed from a partly wrong
    // prefix: that is the Jacobi step), padded back to the window with the last of them.
    std::vector<uint32_t> fresh;
    for (size_t i = k + 1; i < upd->size(); ++i) fresh.push_back((*upd)[i].ids[0]);
    if (fresh.empty()) fresh.push_back(next);
    while (fresh.size() < window) fresh.push_back(fresh.back());
    guess = fresh;
  }

  auto text = model->detokenize(out);
  pith::send(text ? *text : std::string());
  std::string ids;
  for (size_t i = 0; i < out.size(); ++i) ids += (i ? "," : "") + std::to_string(out[i]);
  pith::send(ids);
  char stats[256];
  snprintf(stats, sizeof stats, "{\"tokens\":%zu,\"iterations\":%u,\"forward_calls\":%u,\"finish\":\"%s\"}",
           out.size(), iterations, iterations + 1, finish.c_str());
  pith::send(stats);
  return 0;
}
