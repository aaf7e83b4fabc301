// pith/beam_search.hpp: beam search over Contexts — custom decoding written in the inferlet
// (paper R2), not built into the server.
//
//   auto ctx = pith::Context::create(*model);
//   ctx->fill("The answer is");                         // pending: computed by the search
//   auto beams = pith::beam_search(*ctx, {.beams = 4, .max_tokens = 16});
//   // (*beams)[0] is the best: tokens and total log-probability
//
// Every beam is a Context forked from its parent, so beams share the KV pages of their common
// prefix (fork shares full pages and copies only the partial last one); a parent chosen by a
// single child hands its context over instead of forking. The forwards of one step are all in
// flight together (start_step/finish_step), so the server batches the beams.
//
// Scores are sums of natural-log probabilities (no length normalisation). A beam that emits an
// end-of-sequence token is finished: it keeps its score and its slot among the B beams but is not
// extended. With B >= K^max_tokens nothing is ever pruned and the search is exhaustive over the
// tree of each node's K most likely tokens.
#pragma once

#include <math.h>

#include <algorithm>
#include <optional>
#include <pith/context.hpp>
#include <vector>

namespace pith {

struct BeamSearchOptions {
  uint32_t beams = 4;             // B: beams kept after each step
  uint32_t expand = 0;            // K: candidates taken from each beam per step (0 = B)
  uint32_t max_tokens = 16;       // tokens generated per beam
  bool stop_at_eos = true;        // finish a beam at an end-of-sequence token
  std::vector<uint32_t> eos_ids;  // default: the model's EOS token
};

struct Beam {
  std::vector<uint32_t> tokens;  // generated tokens (the prompt excluded)
  double logprob = 0;            // sum of log p(token | prefix) over tokens
  bool finished = false;         // ended with an end-of-sequence token
};

// Runs the search after `prompt`, whose last token(s) must still be pending (filled, not yet
// computed): the search computes them and never modifies the context otherwise. Returns the
// final beams, best first (ties keep the order in which they were found).
inline Result<std::vector<Beam>> beam_search(Context& prompt, BeamSearchOptions opt) {
  if (opt.beams == 0 || opt.max_tokens == 0)
    return Error(PITH_ERR_BAD_ARGUMENT, "beam search needs at least one beam and one token");
  const uint32_t k = opt.expand ? opt.expand : opt.beams;
  if (opt.stop_at_eos && opt.eos_ids.empty()) opt.eos_ids = prompt.eos_tokens();
  auto is_eos = [&](uint32_t t) {
    return opt.stop_at_eos &&
           std::find(opt.eos_ids.begin(), opt.eos_ids.end(), t) != opt.eos_ids.end();
  };

  struct Live {
    Beam beam;
    std::optional<Context> ctx;  // none for a finished beam (and for the prompt at step 0)
    Distribution next;           // the distribution after the beam's last token
  };
  struct Candidate {
    size_t parent;  // index into the previous step's beams (or 0 = the prompt at step 0)
    uint32_t token;
    double logprob;
    bool carried;  // a finished beam kept as it is
  };

  std::vector<Live> live(1);
  live[0].next = PITH_TRY(prompt.decode_step(k));
  bool at_prompt = true;  // live[0] stands for the prompt itself (no context of its own)

  for (uint32_t step = 0;; ++step) {
    // Every beam's K best continuations, and the finished beams as they are.
    std::vector<Candidate> cands;
    for (size_t i = 0; i < live.size(); ++i) {
      const Live& l = live[i];
      if (l.beam.finished) {
        cands.push_back({i, 0, l.beam.logprob, true});
        continue;
      }
      for (size_t j = 0; j < l.next.ids.size() && j < k; ++j)
        cands.push_back({i, l.next.ids[j], l.beam.logprob + ::log(double(l.next.probs[j])), false});
    }
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.logprob > b.logprob; });
    if (cands.size() > opt.beams) cands.resize(opt.beams);

    auto extend = [&](const Candidate& c) {
      Beam b = live[c.parent].beam;
      if (c.carried) return b;
      b.tokens.push_back(c.token);
      b.logprob = c.logprob;
      b.finished = is_eos(c.token);
      return b;
    };
    if (step + 1 == opt.max_tokens) {  // the last tokens need no forward
      std::vector<Beam> out;
      for (const Candidate& c : cands) out.push_back(extend(c));
      return out;
    }

    // The next generation of beams: fork the parent's context (the last child takes it over).
    std::vector<size_t> uses(live.size(), 0);
    for (const Candidate& c : cands)
      if (!c.carried) ++uses[c.parent];
    std::vector<Live> next(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      const Candidate& c = cands[i];
      next[i].beam = extend(c);
      if (next[i].beam.finished) continue;
      Context& parent = at_prompt ? prompt : *live[c.parent].ctx;
      if (!at_prompt && --uses[c.parent] == 0)
        next[i].ctx.emplace(static_cast<Context&&>(parent));
      else
        next[i].ctx.emplace(PITH_TRY(parent.fork()));
      next[i].ctx->fill_tokens({c.token});
      PITH_TRY(next[i].ctx->start_step(k));
    }
    for (Live& l : next) {
      if (l.beam.finished) continue;
      l.next = PITH_TRY(l.ctx->finish_step());
    }
    live = static_cast<std::vector<Live>&&>(next);
    at_prompt = false;
  }
}

}  // namespace pith
