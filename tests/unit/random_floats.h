// Seeded normal random inputs, shared by the kernel tests that run on the CPU (tests/unit) and
// on a GPU (tests/gpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace pith::cuda {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

}  // namespace pith::cuda
