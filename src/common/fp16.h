// Scalar conversions between f32 and the 16-bit float formats stored in model files.
// (Vectorised bulk conversions live in engine/kernels.)
#pragma once

#include <cstdint>
#include <cstring>

namespace pith {

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  // F16C is baseline on every x86-64 CPU pith targets, but keep this portable and exact.
  uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, with overflow to infinity and gradual underflow.
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                               // subnormal or zero in f16
    // Shift the implicit-one mantissa into place with round-to-nearest-even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift =
        126 - e;  // f16 subnormal unit is 2^-24: value = m * 2^(e-150) = (m >> shift) * 2^-24
    uint32_t half = 1u << (shift - 1);
    uint32_t rounded = (m + half - 1 + ((m >> shift) & 1u)) >> shift;
    return static_cast<uint16_t>(sign | rounded);
  }
  uint32_t r = abs + 0xc8000fffu + ((abs >> 13) & 1u);  // rebias exponent (-112<<23) + rounding
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace pith
