// pith/watermark.hpp: the green-list watermark of Kirchenbauer et al. (2023) and its detector.
// At each step a keyed hash of the previous token splits the vocabulary into a green list
// (fraction gamma) and a red list; generation adds delta to the logits of green tokens, i.e.
// multiplies their probabilities by e^delta, before sampling. Anyone holding the key counts the
// green tokens of a text: without the watermark a fraction gamma is green, so
//   z = (green - gamma T) / sqrt(T gamma (1 - gamma))
// is about N(0, 1); watermarked text has a large positive z.
//
// The green test hashes (key, previous token, token) instead of permuting the vocabulary with
// an RNG seeded by (key, previous token): each token is green with probability gamma, the same
// list for the same previous token, and no O(vocab) permutation per step. Header-only, std-only.
#pragma once

#include <math.h>
#include <stdint.h>
#include <pith/rng.hpp>
#include <pith/sampling.hpp>

#include <algorithm>
#include <vector>

namespace pith {

struct WatermarkKey {
  uint64_t key = 0x5eed;
  float gamma = 0.25f;  // green fraction of the vocabulary
  float delta = 2.0f;   // logit bias of green tokens
};

inline uint64_t watermark_mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline bool is_green(const WatermarkKey& k, uint32_t prev, uint32_t token) {
  const uint64_t h = watermark_mix(k.key ^ watermark_mix((uint64_t{prev} << 32) | token));
  return double(h >> 11) * (1.0 / 9007199254740992.0) < double(k.gamma);
}

// Samples the next token from a full-vocabulary distribution (id order, PITH_TOP_K_ALL) at the
// given temperature (weights p^(1/T)) with green tokens after `prev` boosted by e^delta
// (watermark = nullptr: plain sampling). Exact, by rejection: draw from p^(1/T), keep a green
// token always and a red one with probability e^-delta, so kept draws follow
// p^(1/T) e^(delta green); about e^delta draws at worst, each a binary search, and only the
// drawn tokens are hashed.
inline uint32_t sample_watermarked(const Distribution& d, uint32_t prev,
                                   const WatermarkKey* watermark, float temperature, Rng& rng) {
  if (d.ids.empty()) return 0;
  std::vector<double> cum(d.probs.size());
  double total = 0;
  const bool plain_t = !(temperature > 0) || temperature == 1.0f;
  const double inv_t = plain_t ? 1.0 : 1.0 / double(temperature);
  for (size_t i = 0; i < cum.size(); ++i)
    cum[i] = total += plain_t ? double(d.probs[i]) : ::pow(double(d.probs[i]), inv_t);
  const double keep_red = watermark ? ::exp(-double(watermark->delta)) : 1.0;
  uint32_t tok = d.ids[0];
  for (int tries = 0; tries < 100000; ++tries) {
    const double r = rng.uniform() * total;
    size_t i = static_cast<size_t>(std::upper_bound(cum.begin(), cum.end(), r) - cum.begin());
    tok = d.ids[i < cum.size() ? i : cum.size() - 1];
    if (!watermark || is_green(*watermark, prev, tok) || rng.uniform() < keep_red) return tok;
  }
  return tok;
}

struct WatermarkScore {
  uint32_t scored = 0;  // T: tokens with a previous token
  uint32_t green = 0;
  double z = 0;
};

// The detector: tokens[0] is the context token before the text, tokens[1..] the text.
inline WatermarkScore watermark_score(const WatermarkKey& k, const std::vector<uint32_t>& tokens) {
  WatermarkScore s;
  for (size_t i = 1; i < tokens.size(); ++i) {
    ++s.scored;
    s.green += is_green(k, tokens[i - 1], tokens[i]) ? 1 : 0;
  }
  const double t = s.scored, g = k.gamma;
  if (t > 0) s.z = (double(s.green) - g * t) / ::sqrt(t * g * (1 - g));
  return s;
}

}  // namespace pith
