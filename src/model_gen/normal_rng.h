// Fast, seedable random numbers for generating model weights: xoshiro256+ seeded through
// splitmix64, and standard normal draws by the ziggurat method (Marsaglia & Tsang, 128 layers),
// which needs one 64-bit draw and a multiply for ~98% of samples, so a 1B-parameter model's
// worth of N(0, σ²) values takes seconds. Deterministic: the same seed gives the same stream on
// every machine (tables are computed with exp/log/sqrt in double, then only compared).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace pith {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& w : s_) w = seed = splitmix64(seed);
  }
  uint64_t next() {
    uint64_t result = s_[0] + s_[3];
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }
  // Uniform in (0, 1].
  double uniform() { return (double(next() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  std::array<uint64_t, 4> s_{};
};

// Standard normal sampler. Layer i (1..127) is a rectangle of half-width x[i] between heights
// f(x[i]) and f(x[i-1]); layer 0 is the base strip plus the tail beyond r. A draw picks a layer
// and a signed position; inside the part of the rectangle that lies under the curve (|j| <
// k[i]) it is accepted at once.
class NormalZiggurat {
 public:
  NormalZiggurat() {
    constexpr double r = 3.442619855899, v = 9.91256303526217e-3, m = 2147483648.0;
    double x = r;
    const double q = v / f(r);
    k_[0] = static_cast<uint32_t>((r / q) * m);
    k_[1] = 0;
    w_[0] = q / m;
    w_[127] = r / m;
    fv_[0] = 1.0;
    fv_[127] = f(r);
    for (int i = 126; i >= 1; --i) {
      double next = std::sqrt(-2.0 * std::log(v / x + f(x)));
      k_[i + 1] = static_cast<uint32_t>((next / x) * m);
      x = next;
      fv_[i] = f(x);
      w_[i] = x / m;
    }
  }

  double operator()(Xoshiro256& rng) const {
    for (;;) {
      uint64_t u = rng.next();
      int32_t j = static_cast<int32_t>(u >> 32);
      uint32_t i = static_cast<uint32_t>(u & 127);
      uint32_t aj = j < 0 ? uint32_t(0) - static_cast<uint32_t>(j) : static_cast<uint32_t>(j);
      double x = j * w_[i];
      if (aj < k_[i]) return x;
      if (i == 0) {  // tail beyond r
        constexpr double r = 3.442619855899;
        double tx, ty;
        do {
          tx = -std::log(rng.uniform()) / r;
          ty = -std::log(rng.uniform());
        } while (ty + ty < tx * tx);
        return j > 0 ? r + tx : -r - tx;
      }
      if (fv_[i] + rng.uniform() * (fv_[i - 1] - fv_[i]) < f(x)) return x;
    }
  }

 private:
  static double f(double x) { return std::exp(-0.5 * x * x); }
  std::array<uint32_t, 128> k_{};
  std::array<double, 128> w_{};
  std::array<double, 128> fv_{};
};

}  // namespace pith
