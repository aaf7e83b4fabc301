// pith/step_shaping.hpp: what a decode step's output is shaped by on the server, so the whole
// vocabulary need not come up to the inferlet: a token mask (a grammar's) and logit adjustments
// (penalties and biases). Sampler::shaping() makes one; Context::decode_step(top_k, shaping)
// sends it.
#pragma once

#include <pith/abi.h>
#include <stdint.h>

#include <vector>

namespace pith {

struct StepShaping {
  // Bit t % 64 of word t / 64 set = token t may be returned; tokens past its end may not.
  // Null: every token.
  const std::vector<uint64_t>* allowed = nullptr;
  // Output 0's adjustments, sorted by token (abi.h pith_logit_adjust_t). Null or empty: none.
  const std::vector<pith_logit_adjust_t>* adjust = nullptr;

  // Queues forward `a` shaped by this: forward_tokens, forward_tokens_allowed or
  // forward_tokens_adjusted. A mask of another length than the vocabulary's is copied into
  // `scratch`, cut or padded with disallowed tokens.
  pith_status_t forward(pith_queue_t queue, const pith_forward_tokens_args_t& a,
                        uint32_t vocab_size, std::vector<uint64_t>& scratch,
                        pith_future_t* future) const {
    const uint64_t* words = nullptr;
    uint32_t n_words = 0;
    if (allowed) {
      const size_t need = (size_t{vocab_size} + 63) / 64;
      words = allowed->data();
      if (allowed->size() != need) {
        scratch.assign(allowed->begin(),
                       allowed->begin() + (allowed->size() < need ? allowed->size() : need));
        scratch.resize(need, 0);
        words = scratch.data();
      }
      n_words = static_cast<uint32_t>(need);
    }
    if (adjust && !adjust->empty())
      return pith_forward_tokens_adjusted(queue, &a, words, n_words, adjust->data(),
                                          static_cast<uint32_t>(adjust->size()), future);
    if (allowed) return pith_forward_tokens_allowed(queue, &a, words, n_words, future);
    return pith_forward_tokens(queue, &a, future);
  }
};

}  // namespace pith
