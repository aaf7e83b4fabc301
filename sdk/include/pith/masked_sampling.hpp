// pith/masked_sampling.hpp: sampling under a grammar's token mask, from either form a step
// returns: the whole vocabulary (PITH_TOP_K_ALL) masked here, or the allowed tokens the server
// already ranked (Context::decode_step with a mask). Both draw p^(1/T) over the allowed tokens.
// Header-only, no model calls (unit-tested natively).
#pragma once

#include <math.h>
#include <stdint.h>
#include <pith/rng.hpp>
#include <pith/sampling.hpp>

#include <vector>

namespace pith {

// Draws one of ids[0..n) with weight (p / p_best)^(1/T), computed as exp(log(p / p_best) / T)
// so nothing overflows; every probs[i] > 0. One uniform draw; `fallback` if rounding leaves the
// draw past the last weight.
inline uint32_t draw_tempered(const uint32_t* ids, const float* probs, size_t n, float best_p,
                              float temperature, Rng& rng, uint32_t fallback) {
  const double inv_t = 1.0 / double(temperature), log_best = ::log(double(best_p));
  std::vector<double> weight(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    total += weight[i] = ::exp((::log(double(probs[i])) - log_best) * inv_t);
  double r = rng.uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= weight[i];
    if (r <= 0) return ids[i];
  }
  return fallback;
}

// Samples from a full-vocabulary distribution (ids in id order, as PITH_TOP_K_ALL returns it)
// restricted to the tokens whose mask bit is set: the arg max when temperature <= 0 (ties: the
// lower id, as the engine orders them), else weights p^(1/T) over the allowed tokens. Tokens
// whose probability underflowed to 0 are drawn uniformly only if every allowed one did.
// Returns UINT32_MAX if the mask allows nothing.
inline uint32_t sample_masked(const Distribution& d, const std::vector<uint64_t>& mask,
                              float temperature, Rng& rng) {
  const size_t n = d.probs.size();
  uint32_t best = UINT32_MAX, first = UINT32_MAX;
  float best_p = -1.0f;
  size_t count = 0;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
      const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
      if (i >= n) break;
      if (first == UINT32_MAX) first = static_cast<uint32_t>(i);
      ++count;
      if (d.probs[i] > best_p) {
        best_p = d.probs[i];
        best = static_cast<uint32_t>(i);
      }
    }
  }
  if (best == UINT32_MAX || temperature <= 0) return best;
  if (best_p <= 0) {  // every allowed probability underflowed: uniform over the allowed ones
    size_t k = static_cast<size_t>(rng.uniform() * double(count));
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
        if (k-- == 0)
          return static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
    return first;
  }
  std::vector<uint32_t> ids;
  std::vector<float> probs;
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
      const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
      if (i >= n || d.probs[i] <= 0) continue;
      ids.push_back(static_cast<uint32_t>(i));
      probs.push_back(d.probs[i]);
    }
  return draw_tempered(ids.data(), probs.data(), ids.size(), best_p, temperature, rng, best);
}

// Samples from a distribution the server already restricted to allowed tokens (decode_step
// with a mask: sorted, best first), as sample_masked does from the whole vocabulary: the first
// when temperature <= 0, else weights p^(1/T), uniformly if every probability underflowed.
// Returns UINT32_MAX if it is empty.
inline uint32_t sample_ranked(const Distribution& d, float temperature, Rng& rng) {
  if (d.ids.empty()) return UINT32_MAX;
  if (temperature <= 0) return d.ids[0];
  if (d.probs[0] <= 0) return d.ids[static_cast<size_t>(rng.uniform() * double(d.ids.size()))];
  size_t n = 0;  // sorted: the entries with a probability are a prefix
  while (n < d.ids.size() && d.probs[n] > 0) ++n;
  return draw_tempered(d.ids.data(), d.probs.data(), n, d.probs[0], temperature, rng, d.ids[0]);
}

}  // namespace pith
