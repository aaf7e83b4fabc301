#include "common/fp16.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

namespace pith {

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

// Every one of the 65536 halves converts exactly like the hardware (F16C) conversion.
TEST(Fp16, F16ToF32MatchesHardwareForAllHalves) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float ours = f16_to_f32(static_cast<uint16_t>(h));
    float hw = _cvtsh_ss(static_cast<uint16_t>(h));
    if (std::isnan(hw)) {
      EXPECT_TRUE(std::isnan(ours)) << h;
    } else {
      EXPECT_EQ(std::memcmp(&ours, &hw, 4), 0) << "half 0x" << std::hex << h;
    }
  }
}

TEST(Fp16, F32ToF16RoundsLikeHardware) {
  std::mt19937 rng(7);
  auto check = [](float f) {
    uint16_t ours = f32_to_f16(f);
    uint16_t hw = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(ours)));
    } else {
      EXPECT_EQ(ours, hw) << "float " << f;
    }
  };
  // Random bit patterns cover normals, subnormals, overflow and NaN...
  for (int i = 0; i < 2000000; ++i) check(from_bits(rng()));
  // ...and the rounding boundaries around every half: midpoints and their neighbours.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float a = f16_to_f32(static_cast<uint16_t>(h));
    float b = f16_to_f32(static_cast<uint16_t>(h + 1));
    float mid = (a + b) / 2;
    check(mid);
    check(std::nextafter(mid, 0.0f));
    check(std::nextafter(mid, 1e9f));
  }
}

TEST(Bf16, RoundTripAndRoundToNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-3.5f)), -3.5f);
  // 1 + 2^-8 is exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even): goes up.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

}  // namespace pith
