// Deterministic mixed-text generator for tokenizer tests and `pith bench tokenizer`: English
// prose, source code, CJK, Cyrillic/Greek, emoji (with ZWJ sequences), numbers, whitespace
// runs and the odd long unbroken word, interleaved by a seeded PRNG so every run and every
// machine sees the same bytes. Always valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pith {

// About `bytes` bytes (never fewer, at most one paragraph more) of mixed text.
std::string sample_mixed_text(size_t bytes, uint32_t seed = 42);

}  // namespace pith
