// AVX2 micro-kernel for K-quant weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against ActQ8K
// activations,
// included by matmul_avx2.cpp (internal to engine/kernels).
//
// One weight row x T tokens per call. Per super-block the row's 256 quants are unpacked once
// into eight 32-byte vectors of unsigned levels (2, 3, 4, 5 or 6 bits), each multiplied with every
// token's int8 activations by maddubs (u8 x s8 -> s16 pairs; at most 2 * 63 * 127 < 2^15) and
// weighted by its sub-block scale(s) with madd, summed in int32. The mins (Q2_K/Q4_K/Q5_K) and
// the offsets of Q3_K (4) and Q6_K (32) come from the activations' per-16 sums (ActQ8K::bsums), one
// madd per block. The int32 block sums are converted and accumulated in f32 lanes, reduced at the
// end: the same math as dot_q*k_scalar up to f32 summation order.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"
#include "formats/kquants.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pith::kernels {

template <DType D>
inline constexpr size_t kKBlockBytes = D == DType::Q2_K   ? sizeof(BlockQ2_K)
                                       : D == DType::Q3_K ? sizeof(BlockQ3_K)
                                       : D == DType::Q4_K ? sizeof(BlockQ4_K)
                                       : D == DType::Q5_K ? sizeof(BlockQ5_K)
                                                          : sizeof(BlockQ6_K);

// For the 16-element sub-blocks (Q2_K, Q3_K, Q6_K): 8 int16 scales of one half-block in both
// 128-bit lanes -> word 2g in the low lane, 2g + 1 in the high one: the scales of the 32
// quants at 32g.. of the half (sub-blocks 2g and 2g + 1).
inline __m256i scale_pair(__m256i half_scales, int g) {
  const char k = static_cast<char>(4 * g);  // byte offset of word 2g
  const __m256i pick =
      _mm256_setr_epi8(k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k,
                       k + 1, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3,
                       k + 2, k + 3, k + 2, k + 3, k + 2, k + 3);
  return _mm256_shuffle_epi8(half_scales, pick);
}

// The 2-bit levels of Q2_K / Q3_K at 32g.. of half h (qs: the half's 32 bytes), plus Q3_K's
// third bit from hmask (hm: its 32 bytes) shifted in as 4.
template <DType D>
inline __m256i low_bit_levels(__m256i qs, __m256i hm, int h, int g) {
  __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * g), _mm256_set1_epi8(3));
  if constexpr (D == DType::Q3_K)
    q = _mm256_or_si256(
        q, _mm256_slli_epi16(
               _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + g), _mm256_set1_epi8(1)), 2));
  return q;
}

// Q2_K / Q3_K sub-block scales as int16 (Q2_K: the low nibbles; Q3_K: sc - 32), sub-blocks 0-15.
template <DType D>
inline __m256i low_bit_scales(const uint8_t* blk) {
  if constexpr (D == DType::Q2_K) {
    const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));  // scales first
    return _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
  } else {
    // unpack_q3k_scales in vector form: the low 4 bits are the nibbles of bytes 0-7 (low
    // nibbles for sc[0..7], high for sc[8..15]); the top 2 bits of sc[4q + i] are bits 2q, 2q + 1
    // of byte 8 + i.
    const uint8_t* p = reinterpret_cast<const BlockQ3_K*>(blk)->scales;
    uint64_t lo8;
    uint32_t hi4;
    std::memcpy(&lo8, p, 8);
    std::memcpy(&hi4, p + 8, 4);
    const __m128i low4 = _mm_set1_epi8(15), three = _mm_set1_epi8(3);
    const __m128i b = _mm_cvtsi64_si128(static_cast<int64_t>(lo8));
    const __m128i nibbles =
        _mm_unpacklo_epi64(_mm_and_si128(b, low4), _mm_and_si128(_mm_srli_epi16(b, 4), low4));
    const __m128i h = _mm_set1_epi32(static_cast<int32_t>(hi4));  // bytes 8-11 in every dword
    __m128i top = _mm_and_si128(h, three);
    top = _mm_blend_epi32(top, _mm_and_si128(_mm_srli_epi16(h, 2), three), 0x2);
    top = _mm_blend_epi32(top, _mm_and_si128(_mm_srli_epi16(h, 4), three), 0x4);
    top = _mm_blend_epi32(top, _mm_and_si128(_mm_srli_epi16(h, 6), three), 0x8);
    const __m128i sc =
        _mm_sub_epi8(_mm_or_si128(nibbles, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(sc);
  }
}

// y0[t * ldy] = dot(row, token t) for t < T; token t's blocks start at x0 + t * x_stride.
// kStream: the row is streamed from memory (decode); prefetch kStreamAheadBytes ahead.
template <DType D, int T, bool kStream>
void tile_kquant(const uint8_t* row, const ActQ8K* x0, size_t x_stride, size_t n_blocks, float* y0,
                 size_t ldy) {
  __m256 acc[T], acc_min[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  constexpr size_t kBytes = kKBlockBytes<D>;
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = row + b * kBytes;
    if constexpr (kStream)
      for (size_t off = 0; off < kBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk + kStreamAheadBytes + off), _MM_HINT_T0);
    __m256i s[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    // Adds level vector q (32 quants, activations at byte offset 32 * j of the block) times
    // its scale vector to every token's int32 sums.
    auto accumulate = [&](__m256i q, __m256i scale, int j) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i a =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0[t * x_stride + b].qs + 32 * j));
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale));
      }
    };
    if constexpr (D == DType::Q2_K || D == DType::Q3_K) {
      const uint8_t* qs;
      __m256i hm = _mm256_setzero_si256();
      uint16_t d16, dmin16 = 0;
      if constexpr (D == DType::Q2_K) {
        const BlockQ2_K* w = reinterpret_cast<const BlockQ2_K*>(blk);
        qs = w->qs, d16 = w->d, dmin16 = w->dmin;
      } else {
        const BlockQ3_K* w = reinterpret_cast<const BlockQ3_K*>(blk);
        qs = w->qs, d16 = w->d;
        hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->hmask));
      }
      const __m256i sc16 = low_bit_scales<D>(blk);
      const __m256i scales_of_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                         _mm256_permute2x128_si256(sc16, sc16, 0x11)};
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g)
          accumulate(low_bit_levels<D>(raw, hm, h, g), scale_pair(scales_of_half[h], g), 4 * h + g);
      }
      const float d = _cvtsh_ss(d16);
      __m256i mins = _mm256_setzero_si256();
      if constexpr (D == DType::Q2_K)
        mins = _mm256_cvtepu8_epi16(
            _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)), 4),
                          _mm_set1_epi8(15)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActQ8K& a = x0[t * x_stride + b];
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
        if constexpr (D == DType::Q2_K) {
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(d * a.d), acc[t]);
          acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)),
                                       _mm256_set1_ps(_cvtsh_ss(dmin16) * a.d), acc_min[t]);
        } else {
          // Levels are q + 4: subtract 4 * Σ_j sc_j * (sum of the sub-block's activations).
          const __m256i si =
              _mm256_sub_epi32(s[t], _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 2));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_set1_ps(d * a.d), acc[t]);
        }
      }
    } else if constexpr (D == DType::Q6_K) {
      const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
      const __m256i top2 = _mm256_set1_epi8(0x30);
      // The 16 scales as int16: sub-blocks 0-7 in the low lane, 8-15 in the high one.
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)));
      // Each half's 8 scales in both lanes (immediates outside the loop: at -O1 the loop is
      // not unrolled and the permute's control would not be a constant).
      const __m256i scales_of_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                         _mm256_permute2x128_si256(sc16, sc16, 0x11)};
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i half_scales = scales_of_half[h];
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h));
        const __m256i ql1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh + 32 * h));
        const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(ql0, low4),
                                              _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2)),
                              _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                              _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                              _mm256_and_si256(qh, top2)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2))};
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g)  // 32 quants = sub-blocks 8h + 2g (low lane) and + 1
          accumulate(q[g], scale_pair(half_scales, g), 4 * h + g);
      }
      const float d = _cvtsh_ss(w->d);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActQ8K& a = x0[t * x_stride + b];
        // Levels are q + 32: subtract 32 * Σ_j sc_j * (sum of the sub-block's activations).
        const __m256i off =
            _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), sc16);
        const __m256i si = _mm256_sub_epi32(s[t], _mm256_slli_epi32(off, 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_set1_ps(d * a.d), acc[t]);
      }
    } else {
      const uint8_t* scales;
      const uint8_t* qs;
      uint16_t d16, dmin16;
      __m256i qh = _mm256_setzero_si256();
      if constexpr (D == DType::Q4_K) {
        const BlockQ4_K* w = reinterpret_cast<const BlockQ4_K*>(blk);
        scales = w->scales, qs = w->qs, d16 = w->d, dmin16 = w->dmin;
      } else {
        const BlockQ5_K* w = reinterpret_cast<const BlockQ5_K*>(blk);
        scales = w->scales, qs = w->qs, d16 = w->d, dmin16 = w->dmin;
        qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh));
      }
      // The 6-bit scales and mins, four bytes at a time: sc[0..3] and m[0..3] are the low 6
      // bits of bytes 0-3 and 4-7; sc[4..7] (m[4..7]) take their low 4 bits from the low (high)
      // nibbles of bytes 8-11 and their top 2 bits from the top bits of bytes 0-3 (4-7).
      uint32_t p[3];
      std::memcpy(p, scales, 12);
      const uint32_t sc_lo = p[0] & 0x3f3f3f3fu, m_lo = p[1] & 0x3f3f3f3fu;
      const uint32_t sc_hi = (p[2] & 0x0f0f0f0fu) | (((p[0] >> 6) & 0x03030303u) << 4);
      const uint32_t m_hi = ((p[2] >> 4) & 0x0f0f0f0fu) | (((p[1] >> 6) & 0x03030303u) << 4);
      // 8 scales as int16 in both 128-bit lanes; scale j is broadcast by a byte shuffle.
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(
          _mm_cvtsi64_si128(static_cast<int64_t>(uint64_t{sc_hi} << 32 | sc_lo))));
      auto scale = [&](int j) {
        const __m256i pick = _mm256_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8)));
        return _mm256_shuffle_epi8(sc16, pick);
      };
      const __m256i one = _mm256_set1_epi8(1);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
        __m256i lo = _mm256_and_si256(raw, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        if constexpr (D == DType::Q5_K) {
          // Bit 2c (2c + 1) of qh[l] is bit 4 of element 64c + l (64c + 32 + l).
          lo = _mm256_or_si256(
              lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
          hi = _mm256_or_si256(
              hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
        }
        accumulate(lo, scale(2 * c), 2 * c);
        accumulate(hi, scale(2 * c + 1), 2 * c + 1);
      }
      // Sub-block j's min applies to both 16-sums 2j and 2j + 1: bytes m0 m0 m1 m1 ... m7 m7.
      const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(uint64_t{m_hi} << 32 | m_lo));
      const __m256i mins = _mm256_cvtepu8_epi16(
          _mm_shuffle_epi8(m8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
      const float d = _cvtsh_ss(d16), dmin = _cvtsh_ss(dmin16);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActQ8K& a = x0[t * x_stride + b];
        const __m256i mi =
            _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), mins);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(d * a.d), acc[t]);
        acc_min[t] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(mi), _mm256_set1_ps(dmin * a.d), acc_min[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y0[t * ldy] = avx2::hsum(acc[t]) - avx2::hsum(acc_min[t]);
}

// The 256 unsigned levels of one K-quant block as eight 32-byte vectors in element order:
// Q4_K/Q5_K's q (value d * sc * q - dmin * m), Q6_K's q + 32 (value d * sc * q - 32 d * sc).
template <DType D>
inline void kquant_levels(const uint8_t* blk, __m256i q[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  if constexpr (D == DType::Q2_K || D == DType::Q3_K) {
    // Q2_K's q (value d * sc * q - dmin * m), Q3_K's q + 4 (value d * sc * q - 4 d * sc).
    const uint8_t* qs = D == DType::Q2_K ? reinterpret_cast<const BlockQ2_K*>(blk)->qs
                                         : reinterpret_cast<const BlockQ3_K*>(blk)->qs;
    __m256i hm = _mm256_setzero_si256();
    if constexpr (D == DType::Q3_K)
      hm = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ3_K*>(blk)->hmask));
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
      for (int g = 0; g < 4; ++g) q[4 * h + g] = low_bit_levels<D>(raw, hm, h, g);
    }
  } else if constexpr (D == DType::Q6_K) {
    const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
    const __m256i top2 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh + 32 * h));
      q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                 _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2));
      q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                     _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2));
      q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                     _mm256_and_si256(qh, top2));
      q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2));
    }
  } else {
    const uint8_t* qs;
    __m256i qh = _mm256_setzero_si256();
    if constexpr (D == DType::Q4_K) {
      qs = reinterpret_cast<const BlockQ4_K*>(blk)->qs;
    } else {
      const BlockQ5_K* w = reinterpret_cast<const BlockQ5_K*>(blk);
      qs = w->qs;
      qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh));
    }
    const __m256i one = _mm256_set1_epi8(1);
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i lo = _mm256_and_si256(raw, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (D == DType::Q5_K) {
        // Bit 2c (2c + 1) of qh[l] is bit 4 of element 64c + l (64c + 32 + l).
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
      }
      q[2 * c] = lo;
      q[2 * c + 1] = hi;
    }
  }
}

// quantize_act_q8k with AVX2, bit-identical to it (same d and 1/d; vroundps rounds half to
// even as nearbyint does in the default rounding mode).
inline void quantize_act_q8k_avx2_impl(const float* x, ActQ8K* out, size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    ActQ8K& a = out[b];
    __m256 amax = _mm256_setzero_ps();
    for (size_t i = 0; i < kQK; i += 8)
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    a.d = act_q8k_scale(avx2::hmax(amax));
    const __m256 id = _mm256_set1_ps(a.d != 0.0f ? 1.0f / a.d : 0.0f);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (size_t i = 0; i < kQK; i += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), id),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
      }
      // 32 int32 -> 32 int8 in order (packs work per 128-bit lane; the permute restores order).
      __m256i p =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.qs + i), p);
      // Sums of each 16: widen to int16 (w0: elements 0-15 of these 32, w1: 16-31), add pairs
      // (hadd, per 128-bit lane) and pairs again (madd): lanes 0-3 hold the sums of elements
      // 0-7 (two) and 16-23 (two), lanes 4-7 those of 8-15 and 24-31.
      const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p));
      const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1));
      const __m256i s = _mm256_madd_epi16(_mm256_hadd_epi16(w0, w1), _mm256_set1_epi16(1));
      alignas(32) int32_t t[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
      a.bsums[i / 16] = static_cast<int16_t>(t[0] + t[1] + t[4] + t[5]);
      a.bsums[i / 16 + 1] = static_cast<int16_t>(t[2] + t[3] + t[6] + t[7]);
    }
  }
}

// Rows [r_begin, r_end) x tokens [t_begin, t_end) into y[(t - t_begin) * ldy + (r - r_begin)]:
// each row against groups of up to kKquantTokens tokens (the row stays in L1 between groups).
// Decode stays one row at a time: a Q4_K kernel taking two rows per activation load (tried
// 2026-11-29, Zen 4 capped to AVX2) was no faster on cached matrices and streamed the LM head
// from memory at 7.3-8.0 ms against 5.3 (14-15 ms without its prefetch).
inline constexpr int kKquantTokens = 4;

template <DType D>
void kquant_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                 size_t r_begin, size_t r_end, float* y, size_t ldy) {
  const size_t nb = x.blocks_per_token;
  const bool stream = t_end - t_begin <= size_t(kKquantTokens);
  for (size_t r = r_begin; r < r_end; ++r) {
    for (size_t t = t_begin; t < t_end; t += kKquantTokens) {
      const int nt = static_cast<int>(std::min<size_t>(kKquantTokens, t_end - t));
      const ActQ8K* xt = x.q8k + t * nb;
      float* yt = y + (t - t_begin) * ldy + (r - r_begin);
      for_tile<1, kKquantTokens>(1, nt, [&]<int R, int T>() {
        if (stream)
          tile_kquant<D, T, true>(w.row(r), xt, nb, nb, yt, ldy);
        else
          tile_kquant<D, T, false>(w.row(r), xt, nb, nb, yt, ldy);
      });
    }
  }
}

}  // namespace pith::kernels

#pragma GCC pop_options
