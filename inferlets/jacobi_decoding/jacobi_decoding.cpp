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
#include <stdio.h>

#include <pith/inferlet.hpp>

pith::Status jacobi_decoding(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to continue");
  uint32_t max_tokens = flags.u32("--max-tokens", 64, "tokens to generate at most");
  uint32_t window = flags.u32("--window", 6, "guessed tokens refined per iteration");
  bool bos = !flags.flag("--no-bos", "do not start with the model's BOS token");
  bool prefix_cache = !flags.flag("--no-prefix-cache", "compute the whole prompt");
  PITH_TRY(flags.done());
  if (max_tokens == 0)
    return pith::Error(PITH_ERR_BAD_ARGUMENT, "--max-tokens must be at least 1", 2);

  pith::Model model = PITH_TRY(pith::Model::open(""));
  pith::Context ctx = PITH_TRY(pith::Context::create(model));
  ctx.set_prefix_cache(prefix_cache);
  if (bos && ctx.info().add_bos) ctx.fill_tokens({ctx.info().bos_token});
  PITH_TRY(ctx.fill(prompt));
  const uint32_t eos = ctx.info().eos_token;

  uint32_t next = PITH_TRY(ctx.decode_step(1)).ids[0];
  std::vector<uint32_t> guess(window, next);  // the initial guesses: the first token repeated
  std::vector<uint32_t> out;
  uint32_t iterations = 0;
  std::string finish = "length";
  for (;;) {
    out.push_back(next);
    if (next == eos) finish = "eos";
    if (next == eos || out.size() >= max_tokens) break;
    ctx.fill_tokens({next});
    const size_t base = ctx.tokens().size();
    if (guess.size() > max_tokens - out.size()) guess.resize(max_tokens - out.size());
    ctx.fill_tokens(guess);
    // upd[i]: the greedy token after input i (next, guesses...)
    std::vector<pith::Distribution> upd = PITH_TRY(ctx.decode_all(1));
    ++iterations;
    if (upd.size() != guess.size() + 1)
      return pith::Error(PITH_ERR_INTERNAL,
                         "decode_all returned " + std::to_string(upd.size()) + " distributions");
    size_t k = 0;  // guesses that are already fixed points
    bool stop = false;
    while (k < guess.size() && upd[k].ids[0] == guess[k]) {
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
    ctx.truncate(base + k);
    next = upd[k].ids[0];
    // The updates after the committed ones are the next guesses (computed from a partly wrong
    // prefix: that is the Jacobi step), padded back to the window with the last of them.
    std::vector<uint32_t> fresh;
    for (size_t i = k + 1; i < upd.size(); ++i) fresh.push_back(upd[i].ids[0]);
    if (fresh.empty()) fresh.push_back(next);
    while (fresh.size() < window) fresh.push_back(fresh.back());
    guess = fresh;
  }

  PITH_TRY(pith::send(PITH_TRY(model.detokenize(out))));
  PITH_TRY(pith::send(pith::join(out, ",")));
  char stats[256];
  snprintf(stats, sizeof stats,
           "{\"tokens\":%zu,\"iterations\":%u,\"forward_calls\":%u,\"finish\":\"%s\"}", out.size(),
           iterations, iterations + 1, finish.c_str());
  return pith::send(stats);
}
PITH_INFERLET(jacobi_decoding)
