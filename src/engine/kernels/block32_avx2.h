// Unpacking of ggml's 32-element quant blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, and the
// 32-element sub-blocks of IQ4_XS) into one 32-byte vector each, for the AVX2 and AVX-512
// integer kernels and the AVX2 GEMM's dequantisation (internal to engine/kernels; compiled for
// the includer's target, at least AVX2).
//
// The signed types (Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS) give their quants less the offset (q - 8,
// q - 16; the IQ4 types their table's levels), so a dot with int8 activations times d * d_a is
// the block's product. The "+ m" types (Q4_1, Q5_1)
// give the unsigned levels q ≤ 31: their block product is d * d_a * Σ q·a + m * d_a * Σ a,
// the second term from the activations' rounded block sum (ActQ8::s), as ggml's q4_1 x q8_1
// dot computes it.
#pragma once

#include <immintrin.h>

#include "engine/kernels/matmul_kernels.h"
#include "formats/iquants.h"
#include "formats/legacy_quants.h"
#include "formats/mxfp4.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pith::kernels {

// Bytes per 32 elements (IQ4_XS: on average, for prefetch distances; load_block32 addresses
// its sub-blocks).
template <DType D>
inline constexpr size_t kBlock32Bytes = D == DType::Q8_0     ? sizeof(BlockQ8_0)
                                        : D == DType::Q4_0   ? sizeof(BlockQ4_0)
                                        : D == DType::Q4_1   ? sizeof(BlockQ4_1)
                                        : D == DType::Q5_0   ? sizeof(BlockQ5_0)
                                        : D == DType::IQ4_NL ? sizeof(BlockIQ4_NL)
                                        : D == DType::IQ4_XS ? sizeof(BlockIQ4_XS) / 8
                                        : D == DType::MXFP4  ? sizeof(BlockMXFP4)
                                                             : sizeof(BlockQ5_1);

// Σ q of an activation block's 32 int8 quants (sad against 0 sums q ^ 0x80 = q + 128).
inline int32_t act_q8_sum(const ActQ8& a) {
  const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)),
                                     _mm256_set1_epi8(char(0x80)));
  const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
  const int64_t sum = _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) +
                      _mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3);
  return static_cast<int32_t>(sum - 32 * 128);
}

// 0x10 in byte j where bit j of `bits` is set, else 0: a Q5 block's fifth bits in place.
inline __m256i q5_high_bytes(uint32_t bits) {
  // Byte j takes byte j / 8 of `bits` (per 128-bit lane, both lanes hold all four), then
  // tests its own bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 nibbles of qs in element order (low nibbles, then high nibbles).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

// The table levels of 32 indices stored as nibbles: a byte shuffle looks each index up in the
// 16-entry table (IQ4's, or MXFP4's), held in both 128-bit lanes.
inline __m256i table_levels32(const int8_t* levels, const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  return _mm256_shuffle_epi8(table, nibbles32(qs));
}
inline __m256i iq4_levels32(const uint8_t* qs) {
  return table_levels32(kIq4nlLevels, qs);
}

// Block b of a row: its 32 quants (see above), scale *d and offset *m (0 for the signed types).
// IQ4_NL, IQ4_XS and MXFP4 give their signed levels; IQ4_XS's block b is sub-block b % 8 of
// super-block b / 8, its scale d * (ls - 32) (exact in f32: 11 by 6 significant bits).
template <DType D>
inline __m256i load_block32(const uint8_t* row, size_t b, float* d, float* m) {
  const uint8_t* p = row + b * kBlock32Bytes<D>;
  if constexpr (D == DType::IQ4_NL) {
    const auto* blk = reinterpret_cast<const BlockIQ4_NL*>(p);
    *d = _cvtsh_ss(blk->d), *m = 0.0f;
    return iq4_levels32(blk->qs);
  } else if constexpr (D == DType::IQ4_XS) {
    const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(row) + b / 8;
    const int s = static_cast<int>(b % 8);
    *d = _cvtsh_ss(blk->d) * static_cast<float>(iq4xs_subblock_scale(*blk, s)), *m = 0.0f;
    return iq4_levels32(blk->qs + 16 * s);
  } else if constexpr (D == DType::MXFP4) {
    const auto* blk = reinterpret_cast<const BlockMXFP4*>(p);
    *d = mxfp4_half_scale(blk->e), *m = 0.0f;
    return table_levels32(kMxfp4Levels, blk->qs);
  } else if constexpr (D == DType::Q8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(p);
    *d = _cvtsh_ss(blk->d), *m = 0.0f;
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
  } else if constexpr (D == DType::Q4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(p);
    *d = _cvtsh_ss(blk->d), *m = 0.0f;
    return _mm256_sub_epi8(nibbles32(blk->qs), _mm256_set1_epi8(8));
  } else if constexpr (D == DType::Q4_1) {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(p);
    *d = _cvtsh_ss(blk->d), *m = _cvtsh_ss(blk->m);
    return nibbles32(blk->qs);
  } else if constexpr (D == DType::Q5_0) {
    const auto* blk = reinterpret_cast<const BlockQ5_0*>(p);
    *d = _cvtsh_ss(blk->d), *m = 0.0f;
    const __m256i q = _mm256_or_si256(nibbles32(blk->qs), q5_high_bytes(q5_high_bits(blk->qh)));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  } else {
    static_assert(D == DType::Q5_1);
    const auto* blk = reinterpret_cast<const BlockQ5_1*>(p);
    *d = _cvtsh_ss(blk->d), *m = _cvtsh_ss(blk->m);
    return _mm256_or_si256(nibbles32(blk->qs), q5_high_bytes(q5_high_bits(blk->qh)));
  }
}

}  // namespace pith::kernels

#pragma GCC pop_options
