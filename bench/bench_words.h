// Prompts of common English words for the HTTP benchmarks (pith bench serving, embeddings): one
// word after another from a linear congruential stream, so a seed gives the same text anywhere.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>

namespace pith::bench {

inline constexpr const char* kWords[] = {
    "river",  "mountain", "garden",  "window",   "silver", "engine",  "harbor",  "letter",
    "forest", "candle",   "market",  "thunder",  "bridge", "pocket",  "lantern", "meadow",
    "copper", "violet",   "island",  "whisper",  "castle", "rocket",  "pepper",  "anchor",
    "winter", "summer",   "shadow",  "crystal",  "puzzle", "orchard", "falcon",  "marble",
    "velvet", "compass",  "blanket", "horizon",  "signal", "canyon",  "ember",   "glacier",
    "tunnel", "meteor",   "saddle",  "feather",  "quartz", "ribbon",  "timber",  "voyage",
    "basket", "cobalt",   "dune",    "festival", "goblet", "hammock", "juniper", "kettle"};

// Appends `n` words drawn from `state` (advanced), space-separated from what `text` holds.
inline void append_words(std::string& text, uint64_t& state, int n) {
  for (int w = 0; w < n; ++w) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    if (!text.empty()) text += ' ';
    text += kWords[(state >> 33) % std::size(kWords)];
  }
}

}  // namespace pith::bench
