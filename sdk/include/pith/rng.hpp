// pith/rng.hpp: a small deterministic random generator for inferlet samplers (xorshift64*):
// the same seed gives the same stream on the guest and natively, with no libc state.
#pragma once

#include <stdint.h>

namespace pith {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  // Uniform in [0, 1).
  double uniform() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return double((s_ * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
  }

 private:
  uint64_t s_;
};

}  // namespace pith
