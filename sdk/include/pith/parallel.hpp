// pith/parallel.hpp: branches of one context generating side by side — the shared machinery of
// the thought-structured inferlets (tree/graph/recursion/skeleton of thought) and of MCTS.
//
//   std::vector<pith::Context> kids = PITH_TRY(pith::fork_n(root, 3));  // share root's full pages
//   std::vector<pith::Branch> bs;
//   for (size_t i = 0; i < kids.size(); ++i)
//     bs.push_back({&kids[i], pith::Sampler::temperature(0.8f, i), {.max_tokens = 16}});
//   pith::generate_parallel(bs);                          // bs[i].out.text, bs[i].logprob
//
// Prefix sharing: fork() shares every full page of the parent and copies only its partial last
// page, so n branches cost one prompt prefill, not n. Batching: each round starts one decode step
// on every unfinished branch before waiting for any (Context::start_step/finish_step), so the
// control layer puts the branches' single-token forwards into the same batch.
#pragma once

#include <math.h>

#include <pith/context.hpp>
#include <vector>

namespace pith {

// Forks `parent` n ways; pending tokens of the parent are computed once, first.
inline Result<std::vector<Context>> fork_n(Context& parent, size_t n) {
  std::vector<Context> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(PITH_TRY(parent.fork()));
  }
  return out;
}

// How many leading KV pages two contexts hold in common (the same page, not a copy).
inline uint32_t shared_prefix_pages(const Context& a, const Context& b) {
  uint32_t n = 0;
  while (n < a.pages().size() && n < b.pages().size() && a.pages()[n] == b.pages()[n]) ++n;
  return n;
}

// One generation of generate_parallel: the context to extend (its last token(s) pending or not),
// how to sample, when to stop, and what came out.
struct Branch {
  Context* ctx = nullptr;
  Sampler sampler;
  Stop stop;
  Generation out;
  double logprob = 0;  // sum of log p(sampled token); a token outside the top-K counts as p = 1e-9
  bool done = false;
};

struct ParallelStats {
  uint32_t rounds = 0;     // lock-step rounds (each waits for every branch once)
  uint32_t steps = 0;      // decode steps over all branches
  uint32_t max_width = 0;  // most branches with a step in flight together
};

namespace detail {
inline void end_with_error(Branch& b, Error e) {
  b.done = true;
  b.out.finish_reason = status_name(e.code);
  b.out.error = std::move(e);
}
inline double logprob_of(const Distribution& d, uint32_t tok) {
  for (size_t i = 0; i < d.ids.size(); ++i)
    if (d.ids[i] == tok) return d.probs[i] > 0 ? ::log(double(d.probs[i])) : -20.7;
  return -20.7;  // log(1e-9): not among the K candidates the host sent
}
}  // namespace detail

// Runs every branch to its stop condition, one decode step per branch per round. Each branch's
// context must have at least one pending token (e.g. a cue filled after fork()); a branch with
// nothing pending ends at once with finish_reason "bad argument". A branch that fails keeps its
// error in out.error (generate_parallel_checked returns the first). The sampled tokens are left
// pending, so a branch can be continued or scored later.
inline ParallelStats generate_parallel(std::vector<Branch>& bs) {
  ParallelStats st;
  for (Branch& b : bs) {
    if (b.stop.eos_ids.empty() && b.ctx) b.stop.eos_ids = b.ctx->eos_tokens();
  }
  for (;;) {
    std::vector<Branch*> live;
    for (Branch& b : bs) {
      if (b.done) continue;
      Status s = b.ctx ? b.ctx->start_step(b.sampler.step_top_k(), b.sampler.shaping())
                       : Status(Error(PITH_ERR_BAD_ARGUMENT, "branch without a context"));
      if (!s) {
        detail::end_with_error(b, std::move(s).take_error());
        continue;
      }
      live.push_back(&b);
    }
    if (live.empty()) break;
    ++st.rounds;
    st.steps += static_cast<uint32_t>(live.size());
    if (live.size() > st.max_width) st.max_width = static_cast<uint32_t>(live.size());
    for (Branch* b : live) {
      Result<Distribution> d = b->ctx->finish_step();
      if (!d) {
        detail::end_with_error(*b, std::move(d).take_error());
        continue;
      }
      uint32_t tok = b->sampler.sample_step(*d);
      b->logprob += detail::logprob_of(*d, tok);
      b->out.tokens.push_back(tok);
      b->ctx->fill_tokens({tok});
      const size_t stop_bytes = b->stop.max_string_bytes();
      Result<std::string> tail =
          stop_bytes ? b->ctx->model().detokenize_tail(b->out.tokens, stop_bytes) : std::string();
      if (!tail) {
        detail::end_with_error(*b, std::move(tail).take_error());
        continue;
      }
      const char* why = b->stop.check(b->out.tokens, *tail);
      if (*why) {
        b->done = true;
        b->out.finish_reason = why;
      }
    }
  }
  // The whole texts, decoded once (a tail per step was enough for the stop checks).
  for (Branch& b : bs) {
    if (!b.ctx) continue;
    Result<std::string> text = b.ctx->model().detokenize(b.out.tokens);
    if (text)
      b.out.text = std::move(*text);
    else if (!b.out.error)
      detail::end_with_error(b, std::move(text).take_error());
  }
  return st;
}

// generate_parallel, failing with the first branch error (in branch order), if any.
inline Result<ParallelStats> generate_parallel_checked(std::vector<Branch>& bs) {
  ParallelStats st = generate_parallel(bs);
  for (const Branch& b : bs)
    if (b.out.error) return *b.out.error;
  return st;
}

// Token accounting over contexts that come and go: what the model computed for them against
// what independent requests (each prefilling its whole context again) would have computed.
struct TokenLedger {
  uint64_t forwarded = 0;    // tokens actually run through the model, over every counted context
  uint64_t independent = 0;  // sum of the lengths of the counted branches' contexts
  // Call once per context, before it goes away: adds what it computed itself.
  void computed(const Context& c) { forwarded += c.forwarded_tokens(); }
  // Call for each branch whose full context an independent request would have had to prefill.
  void branch(const Context& c) { independent += c.tokens().size(); }
};

}  // namespace pith
