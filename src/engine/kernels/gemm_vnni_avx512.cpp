// The compute-bound path of matmul for the integer-dot quants on AVX512_VNNI CPUs (prefill and
// large decode batches): the 32-block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, IQ4_XS's
// sub-blocks) and the K-quants
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
//
// Why: the register tiles of matmul_avx512.cpp (and the AVX2 K-quant rows AVX-512 CPUs ran)
// spend several vector ops per 32 multiply-adds (sign fix-up or maddubs + madd, convert, scale,
// FMA), one row against one token at a time. Here the weights are repacked per task so that one
// 512-bit vpdpbusd does 64 multiply-adds for 16 rows at once, with the token's 4 activation bytes
// broadcast straight from memory; the float work per scale unit (32 quants; 16 for Q6_K) is 3-4
// ops beside its 8 (4) vpdpbusd.
//
// Packing (per task of kTaskRows rows, all K, into the worker's scratch; reused by every token):
//   per 16-row panel, per weight block: the quants as 64-byte groups, group G holding for each
//   row r the 4 bytes [4G, 4G + 4) (16 x 8 transposes of 32-bit words), then per scale unit the
//   16 row scales (f32) and, where the type has them, the 16 row offsets.
// vpdpbusd multiplies unsigned by signed bytes:
//   - Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS (signed levels): stored as q + 128 (q ^ 0x80); the
//   accumulator starts at
//     -128 * Σ a of the activation block (precomputed per call), so the int32 sums are exact.
//   - Q4_1, Q5_1: levels 0..31 as stored; + m * s_a per block, as the tiles do.
//   - K-quants: unsigned levels (Q3_K's q + 4 and Q6_K's q + 32 too); scale d * sc, offset dmin * m
//     (Q3_K: 4 d sc, Q6_K: 32 d sc)
//     times d_a * Σ a of the unit, from the activations' per-16 sums (precomputed per call).
//
// Same math as the other paths (exact integer sums per unit, then f32 scaling); only the f32
// summation order differs. Rows past the end are zero-padded in the panel and never stored.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "common/error.h"
#include "engine/kernels/block32_avx2.h"
#include "engine/kernels/kquant_avx2.h"
#include "engine/kernels/matmul_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#include "engine/kernels/panel_gemm_avx512.h"

namespace pith::kernels {

namespace {

using namespace panel_gemm;

std::atomic<size_t> g_min_tokens{kPanelGemmDefaultMinTokens};

// Up to this many tokens a product streams its weights from memory once: the Q4_K panels run
// one panel and one token per tile (fewer registers live, the loads in memory order).
constexpr size_t kDecodeTokens = 2;

// ---- the 32-block quants: one unit of 32 per block ----

template <DType D>
struct Block32Format {
  using Act = ActQ8;
  static constexpr bool kMin = has_block_min(D);
  static constexpr size_t kCols = 32;
  // Per panel and block: the quants, then the 16 scales d (and offsets m) as stored, fp16;
  // IQ4_XS's sub-block scales d * (ls - 32) and MXFP4's powers of two as f32 (fp16 cannot
  // hold them exactly).
  static constexpr bool kF32Scales = D == DType::IQ4_XS || D == DType::MXFP4;
  static constexpr size_t kScaleBytes = kF32Scales ? 64 : 32;
  static constexpr size_t kBytes = 8 * 64 + kScaleBytes + (kMin ? 32 : 0);
  // 2 panels x 6 tokens: 12 int32 + 12 f32 accumulators; each activation broadcast feeds 2.
  static constexpr int kPanels = 2, kTokens = 6;

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    // A padded row: quants whose stored byte means 0, scale 0.
    const __m256i pad = kMin ? _mm256_setzero_si256() : _mm256_set1_epi8(char(0x80));
    for (size_t b = 0; b < nb; ++b, dst += kBytes) {
      uint16_t* scales = reinterpret_cast<uint16_t*>(dst + 8 * 64);
      float* scales_f32 = reinterpret_cast<float*>(dst + 8 * 64);
      __m256i rows[16];
      for (size_t r = 0; r < 16; ++r) {
        float d = 0.0f, m = 0.0f;
        rows[r] = pad;
        if (r < n_rows) {
          const __m256i q = load_block32<D>(w0 + r * w_stride, b, &d, &m);
          rows[r] = kMin ? q : _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80)));
        }
        if constexpr (kF32Scales) {
          scales_f32[r] = d;
        } else {
          scales[r] = _cvtss_sh(d, 0);  // exact: d and m were fp16
          if constexpr (kMin) scales[16 + r] = _cvtss_sh(m, 0);
        }
      }
      store_groups(rows, dst);
    }
  }

  // Per activation block: -128 * Σ q (the signed types' start value), or nothing.
  using Side = int32_t;
  static constexpr size_t kSidePerBlock = kMin ? 0 : 1;
  static void side(const ActQ8& a, int32_t* out) { out[0] = -128 * act_q8_sum(a); }

  template <int P, int T>
  static void tile(const uint8_t* panels, size_t panel_bytes, const ActQ8* x, const int32_t* corr,
                   size_t nb, __m512 (&accf)[P][T]) {
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panels + b * kBytes;
      __m512i acc[P][T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i init = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(corr[t * nb + b]);
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) acc[p][t] = init;
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m512i wv[P];
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) wv[p] = _mm512_loadu_si512(blk + p * panel_bytes + g * 64);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          int32_t a4;
          __builtin_memcpy(&a4, x[t * nb + b].qs + 4 * g, 4);
          const __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) acc[p][t] = _mm512_dpbusd_epi32(acc[p][t], wv[p], av);
        }
      }
      __m512 wd[P], wm[P];
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const uint8_t* sc = blk + p * panel_bytes + 8 * 64;
        if constexpr (kF32Scales)
          wd[p] = _mm512_loadu_ps(sc);
        else
          wd[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc)));
        if constexpr (kMin)
          wm[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + 32)));
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const ActQ8& a = x[t * nb + b];
        const __m512 xd = _mm512_set1_ps(a.d);
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          accf[p][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[p][t]), _mm512_mul_ps(wd[p], xd), accf[p][t]);
          if constexpr (kMin) accf[p][t] = _mm512_fmadd_ps(wm[p], _mm512_set1_ps(a.s), accf[p][t]);
        }
      }
    }
  }
};

// ---- Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4 packed once at load: quants stay nibbles ----
//
// Per panel and 32-block, exactly 16 x the file's block bytes (decode streams them): 4 groups of
// 64 bytes, group G holding for each row the file's qs bytes [4G, 4G + 4) (low nibbles: quants
// 4G.., high nibbles: quants 16 + 4G..); for Q5_0/Q5_1 the fifth bits as 8 64-bit masks (group
// G's low quants, then its high ones; bit 4r + k is row r's quant k of the group), added as 16
// by one masked byte add; then the 16 d (fp16) and for Q4_1/Q5_1 the 16 m. The signed types'
// offsets (8, 16) leave through the block's start value -offset * Σ a, as in Block32Format.
// The IQ4 types look their nibbles up (one byte shuffle) as level + 128, offset 128. IQ4_XS
// keeps its super-blocks: 8 sub-blocks of the 4 groups and the 16 signed multipliers ls - 32
// (int8), then the 16 d as f32 (2240 bytes, 140 per row and 256 columns against the file's 136).
// MXFP4 keeps its 16 exponent bytes in place of the d (16 x 17 bytes per block, as the file's).
// The table levels + 128 (IQ4: 1..241, MXFP4: 116..140), for vpshufb lookups by nibble in each
// 128-bit lane.
constexpr std::array<uint8_t, 16> biased_levels(const int8_t (&levels)[16]) {
  std::array<uint8_t, 16> biased{};
  for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(levels[i] + 128);
  return biased;
}
alignas(16) constexpr auto kIq4BiasedLevels = biased_levels(kIq4nlLevels);
alignas(16) constexpr auto kMxfp4BiasedLevels = biased_levels(kMxfp4Levels);

template <DType D, int kP, int kT>
struct Block32NibbleFormat {
  using Act = ActQ8;
  static constexpr bool kMin = has_block_min(D);
  static constexpr bool kFifth = D == DType::Q5_0 || D == DType::Q5_1;
  static constexpr bool kXs = D == DType::IQ4_XS;
  static constexpr bool kFp4 = D == DType::MXFP4;
  static constexpr int32_t kOffset = D == DType::Q4_0   ? 8
                                     : D == DType::Q5_0 ? 16
                                     : is_iq4(D)        ? 128
                                                        : 0;
  static constexpr size_t kCols = 32;
  static constexpr size_t kMasks = 256, kD = kMasks + (kFifth ? 64 : 0), kM = kD + 32;
  // IQ4_XS: per sub-block the groups and the multipliers (kD: 16 int8); per super-block the d.
  static constexpr size_t kSubBytes = 256 + 16, kSuperBytes = 8 * kSubBytes + 64;
  static constexpr size_t kBytes = kXs ? kSuperBytes / 8 : kFp4 ? kD + 16 : kM + (kMin ? 32 : 0);
  static_assert(kXs || kBytes == 16 * kBlock32Bytes<D>);
  static constexpr int kPanels = kP, kTokens = kT;

  // Where 32-block b of a panel starts (IQ4_XS: its sub-block), and where its row scales are.
  static const uint8_t* block_at(const uint8_t* panel, size_t b) {
    if constexpr (kXs) return panel + b / 8 * kSuperBytes + b % 8 * kSubBytes;
    return panel + b * kBytes;
  }
  static uint8_t* block_at(uint8_t* panel, size_t b) {
    return const_cast<uint8_t*>(block_at(static_cast<const uint8_t*>(panel), b));
  }
  static __m512 row_scales(const uint8_t* panel, size_t b) {
    const uint8_t* blk = block_at(panel, b);
    if constexpr (kXs) {
      const __m512 d = _mm512_loadu_ps(panel + b / 8 * kSuperBytes + 8 * kSubBytes);
      const __m128i ls = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kD));
      return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ls)));
    }
    if constexpr (kFp4) {  // 2^(e - 128) (mxfp4_half_scale): exponent field e - 1, e < 2 subnormal
      const __m512i e =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kD)));
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
      const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
      return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
    }
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kD)));
  }

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* panel) {
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* dst = block_at(panel, b);
      uint16_t* d = reinterpret_cast<uint16_t*>(dst + kD);
      uint16_t* m = reinterpret_cast<uint16_t*>(dst + kM);
      uint32_t high[16] = {};
      for (size_t r = 0; r < 16; ++r) {
        const uint8_t* qs = nullptr;
        uint16_t dr = 0, mr = 0;  // a padded row: all zero
        if (r < n_rows) {
          const uint8_t* p = w0 + r * w_stride + b * kBlock32Bytes<D>;
          if constexpr (D == DType::IQ4_NL) {
            const auto* blk = reinterpret_cast<const BlockIQ4_NL*>(p);
            qs = blk->qs, dr = blk->d;
          } else if constexpr (kFp4) {
            const auto* blk = reinterpret_cast<const BlockMXFP4*>(p);
            qs = blk->qs, dr = blk->e;  // the exponent byte, stored below
          } else if constexpr (kXs) {
            const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(w0 + r * w_stride) + b / 8;
            qs = blk->qs + 16 * (b % 8);
            reinterpret_cast<int8_t*>(dst + kD)[r] =
                static_cast<int8_t>(iq4xs_subblock_scale(*blk, static_cast<int>(b % 8)));
            reinterpret_cast<float*>(panel + b / 8 * kSuperBytes + 8 * kSubBytes)[r] =
                _cvtsh_ss(blk->d);
          } else if constexpr (D == DType::Q4_0) {
            const auto* blk = reinterpret_cast<const BlockQ4_0*>(p);
            qs = blk->qs, dr = blk->d;
          } else if constexpr (D == DType::Q4_1) {
            const auto* blk = reinterpret_cast<const BlockQ4_1*>(p);
            qs = blk->qs, dr = blk->d, mr = blk->m;
          } else if constexpr (D == DType::Q5_0) {
            const auto* blk = reinterpret_cast<const BlockQ5_0*>(p);
            qs = blk->qs, dr = blk->d, high[r] = q5_high_bits(blk->qh);
          } else {
            const auto* blk = reinterpret_cast<const BlockQ5_1*>(p);
            qs = blk->qs, dr = blk->d, mr = blk->m, high[r] = q5_high_bits(blk->qh);
          }
        }
        for (int g = 0; g < 4; ++g) {
          uint8_t* out = dst + g * 64 + 4 * r;
          if (qs)
            std::memcpy(out, qs + 4 * g, 4);
          else
            std::memset(out, 0, 4);
        }
        if constexpr (kXs) {
          if (r >= n_rows) {
            reinterpret_cast<int8_t*>(dst + kD)[r] = 0;
            reinterpret_cast<float*>(panel + b / 8 * kSuperBytes + 8 * kSubBytes)[r] = 0.0f;
          }
        } else if constexpr (kFp4) {
          dst[kD + r] = static_cast<uint8_t>(dr);
        } else {
          d[r] = dr;
        }
        if constexpr (kMin) m[r] = mr;
      }
      if constexpr (kFifth) {
        uint64_t* masks = reinterpret_cast<uint64_t*>(dst + kMasks);
        for (int g = 0; g < 4; ++g)
          for (int half = 0; half < 2; ++half) {
            uint64_t bits = 0;
            for (size_t r = 0; r < 16; ++r)
              bits |= uint64_t{(high[r] >> (16 * half + 4 * g)) & 15u} << (4 * r);
            masks[2 * g + half] = bits;
          }
      }
    }
  }

  // Per activation block: the signed types' start value -offset * Σ a, or nothing.
  using Side = int32_t;
  static constexpr size_t kSidePerBlock = kMin ? 0 : 1;
  static void side(const ActQ8& a, int32_t* out) { out[0] = -kOffset * act_q8_sum(a); }

  template <int P, int T>
  static void tile(const uint8_t* panels, size_t panel_bytes, const ActQ8* x, const int32_t* corr,
                   size_t nb, __m512 (&accf)[P][T]) {
    const __m512i nibble = _mm512_set1_epi8(0x0f), fifth = _mm512_set1_epi8(0x10);
    const __m512i levels = _mm512_broadcast_i32x4(_mm_load_si128(
        reinterpret_cast<const __m128i*>((kFp4 ? kMxfp4BiasedLevels : kIq4BiasedLevels).data())));
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = block_at(panels, b);
      // Two chains per output (low and high nibbles), 4 dots each.
      __m512i lo_acc[P][T], hi_acc[P][T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i init = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(corr[t * nb + b]);
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) lo_acc[p][t] = init, hi_acc[p][t] = _mm512_setzero_si512();
      }
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i lo[P], hi[P];
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          const uint8_t* panel = blk + p * panel_bytes;
          const __m512i wv = _mm512_loadu_si512(panel + g * 64);
          lo[p] = _mm512_and_si512(wv, nibble);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(wv, 4), nibble);
          if constexpr (is_iq4(D)) {
            lo[p] = _mm512_shuffle_epi8(levels, lo[p]);
            hi[p] = _mm512_shuffle_epi8(levels, hi[p]);
          }
          if constexpr (kFifth) {
            const uint64_t* masks = reinterpret_cast<const uint64_t*>(panel + kMasks);
            lo[p] = _mm512_mask_add_epi8(lo[p], _cvtu64_mask64(masks[2 * g]), lo[p], fifth);
            hi[p] = _mm512_mask_add_epi8(hi[p], _cvtu64_mask64(masks[2 * g + 1]), hi[p], fifth);
          }
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const int8_t* qs = x[t * nb + b].qs + 4 * g;
          int32_t a_lo, a_hi;
          __builtin_memcpy(&a_lo, qs, 4);
          __builtin_memcpy(&a_hi, qs + 16, 4);
          const __m512i av_lo = _mm512_set1_epi32(a_lo), av_hi = _mm512_set1_epi32(a_hi);
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) {
            lo_acc[p][t] = _mm512_dpbusd_epi32(lo_acc[p][t], lo[p], av_lo);
            hi_acc[p][t] = _mm512_dpbusd_epi32(hi_acc[p][t], hi[p], av_hi);
          }
        }
      }
      __m512 wd[P], wm[P];
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const uint8_t* panel = blk + p * panel_bytes;
        wd[p] = row_scales(panels + p * panel_bytes, b);
        if constexpr (kMin)
          wm[p] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + kM)));
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const ActQ8& a = x[t * nb + b];
        const __m512 xd = _mm512_set1_ps(a.d);
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          const __m512i sum = _mm512_add_epi32(lo_acc[p][t], hi_acc[p][t]);
          accf[p][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(wd[p], xd), accf[p][t]);
          if constexpr (kMin) accf[p][t] = _mm512_fmadd_ps(wm[p], _mm512_set1_ps(a.s), accf[p][t]);
        }
      }
    }
  }
};

// ---- the K-quants: 256-blocks of 8 units of 32 (Q4_K, Q5_K) or 16 units of 16 (Q6_K) ----

template <DType D>
struct KquantFormat {
  using Act = ActQ8K;
  static constexpr size_t kCols = kQK;
  static constexpr int kUnit = D == DType::Q4_K || D == DType::Q5_K ? 32 : 16;
  static constexpr int kUnits = kQK / kUnit;
  static constexpr int kGroupsPerUnit = kUnit / 4;
  static constexpr size_t kScaleBytes = 64 * kGroupsPerUnit * kUnits;  // 4096
  static constexpr size_t kBytes = kScaleBytes + 2 * kUnits * 64;      // + scales, offsets
  static constexpr int kPanels = 2, kTokens = 6;

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    constexpr size_t kBlockBytes = kKBlockBytes<D>;
    for (size_t b = 0; b < nb; ++b, dst += kBytes) {
      float* scales = reinterpret_cast<float*>(dst + kScaleBytes);
      float* offsets = scales + 16 * kUnits;
      __m256i q[16][8];
      for (size_t r = 0; r < 16; ++r) {
        if (r >= n_rows) {
          for (int j = 0; j < 8; ++j) q[r][j] = _mm256_setzero_si256();
          for (int u = 0; u < kUnits; ++u) scales[u * 16 + r] = offsets[u * 16 + r] = 0.0f;
          continue;
        }
        const uint8_t* blk = w0 + r * w_stride + b * kBlockBytes;
        kquant_levels<D>(blk, q[r]);
        if constexpr (D == DType::Q2_K) {
          const BlockQ2_K* w = reinterpret_cast<const BlockQ2_K*>(blk);
          const float d = _cvtsh_ss(w->d), dmin = _cvtsh_ss(w->dmin);
          for (int u = 0; u < kUnits; ++u) {
            scales[u * 16 + r] = d * (w->scales[u] & 15);
            offsets[u * 16 + r] = dmin * (w->scales[u] >> 4);
          }
        } else if constexpr (D == DType::Q3_K) {
          const BlockQ3_K* w = reinterpret_cast<const BlockQ3_K*>(blk);
          int8_t sc[16];
          unpack_q3k_scales(w->scales, sc);
          const float d = _cvtsh_ss(w->d);
          for (int u = 0; u < kUnits; ++u) {
            scales[u * 16 + r] = d * sc[u];
            offsets[u * 16 + r] = 4.0f * (d * sc[u]);
          }
        } else if constexpr (D == DType::Q6_K) {
          const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
          const float d = _cvtsh_ss(w->d);
          for (int u = 0; u < kUnits; ++u) {
            scales[u * 16 + r] = d * w->scales[u];
            offsets[u * 16 + r] = 32.0f * (d * w->scales[u]);
          }
        } else {
          const auto* w =
              reinterpret_cast<const std::conditional_t<D == DType::Q4_K, BlockQ4_K, BlockQ5_K>*>(
                  blk);
          uint8_t sc[8], m[8];
          unpack_q4k_scales(w->scales, sc, m);
          const float d = _cvtsh_ss(w->d), dmin = _cvtsh_ss(w->dmin);
          for (int u = 0; u < kUnits; ++u) {
            scales[u * 16 + r] = d * sc[u];
            offsets[u * 16 + r] = dmin * m[u];
          }
        }
      }
      for (int j = 0; j < 8; ++j) {
        __m256i rows[16];
        for (size_t r = 0; r < 16; ++r) rows[r] = q[r][j];
        store_groups(rows, dst + j * 8 * 64);
      }
    }
  }

  // Per activation block: d_a * Σ a of each unit (its offsets' multiplier).
  using Side = float;
  static constexpr size_t kSidePerBlock = kUnits;
  static void side(const ActQ8K& a, float* out) {
    for (int u = 0; u < kUnits; ++u)
      out[u] =
          a.d * static_cast<float>(kUnit == 16 ? a.bsums[u] : a.bsums[2 * u] + a.bsums[2 * u + 1]);
  }

  template <int P, int T>
  static void tile(const uint8_t* panels, size_t panel_bytes, const ActQ8K* x, const float* sums,
                   size_t nb, __m512 (&accf)[P][T]) {
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panels + b * kBytes;
      for (int u = 0; u < kUnits; ++u) {
        __m512i acc[P][T];
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < kGroupsPerUnit; ++g) {
          const int group = u * kGroupsPerUnit + g;
          __m512i wv[P];
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p)
            wv[p] = _mm512_loadu_si512(blk + p * panel_bytes + group * 64);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            int32_t a4;
            __builtin_memcpy(&a4, x[t * nb + b].qs + 4 * group, 4);
            const __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 16
            for (int p = 0; p < P; ++p) acc[p][t] = _mm512_dpbusd_epi32(acc[p][t], wv[p], av);
          }
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512 da = _mm512_set1_ps(x[t * nb + b].d);
          const __m512 sum = _mm512_set1_ps(sums[(t * nb + b) * kUnits + u]);
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) {
            const float* sc = reinterpret_cast<const float*>(blk + p * panel_bytes + kScaleBytes);
            accf[p][t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[p][t]),
                                _mm512_mul_ps(_mm512_loadu_ps(sc + 16 * u), da), accf[p][t]);
            accf[p][t] = _mm512_fnmadd_ps(_mm512_loadu_ps(sc + 16 * (kUnits + u)), sum, accf[p][t]);
          }
        }
      }
    }
  }
};

// ---- Q4_K packed once at load: the quants stay nibbles (weight_panels.h: Q4KPanels) ----
//
// Per unit the integer dot is scaled by sc in int32 (exact, as the file's math), the mins term
// is Σ m · (Σ a of the unit) by vpdpwssd, and only the block's two sums are scaled in f32
// (d · d_a, dmin · d_a).
template <int kP, int kT>
struct Q4KNibbleFormat : Q4KPanels {
  using Act = ActQ8K;
  static constexpr int kPanels = kP, kTokens = kT;

  template <int P, int T>
  static void tile(const uint8_t* panels, size_t panel_bytes, const ActQ8K* x, const int32_t* sums,
                   size_t nb, __m512 (&accf)[P][T]) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panels + b * kBytes;
      __m512i acc[P][T];  // Σ_u sc_u · (Σ q a over unit u)
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        __m512i lo_acc[P][T], hi_acc[P][T];
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) lo_acc[p][t] = hi_acc[p][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          __m512i lo[P], hi[P];
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) {
            // No software prefetch, decode included: the panels are one sequential stream per
            // task, which the hardware prefetchers follow; prefetching 8 KiB ahead cost Zen 4
            // 10-25 % of its streaming rate (bench matmul, interleaved).
            const __m512i wv = _mm512_loadu_si512(blk + p * panel_bytes + (c * 8 + g) * 64);
            lo[p] = _mm512_and_si512(wv, nibble);
            hi[p] = _mm512_andnot_si512(nibble, wv);  // 16 x the high nibble: one op, no shift
          }
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const int8_t* qs = x[t * nb + b].qs + 64 * c + 4 * g;
            int32_t a_lo, a_hi;
            __builtin_memcpy(&a_lo, qs, 4);
            __builtin_memcpy(&a_hi, qs + 32, 4);
            const __m512i av_lo = _mm512_set1_epi32(a_lo), av_hi = _mm512_set1_epi32(a_hi);
#pragma GCC unroll 16
            for (int p = 0; p < P; ++p) {
              lo_acc[p][t] = _mm512_dpbusd_epi32(lo_acc[p][t], lo[p], av_lo);
              hi_acc[p][t] = _mm512_dpbusd_epi32(hi_acc[p][t], hi[p], av_hi);
            }
          }
        }
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          const uint8_t* sc = blk + p * panel_bytes + kScales + 2 * c * 16;
          const __m512i s_lo =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
          const __m512i s_hi =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16)));
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t)
            acc[p][t] = _mm512_add_epi32(
                acc[p][t],
                _mm512_add_epi32(_mm512_mullo_epi32(lo_acc[p][t], s_lo),
                                 _mm512_mullo_epi32(_mm512_srai_epi32(hi_acc[p][t], 4), s_hi)));
        }
      }
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const uint8_t* meta = blk + p * panel_bytes;
        const __m512 dv =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + kD)));
        const __m512 dminv =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + kDmin)));
        __m512i mw[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c)
          mw[c] = _mm512_cvtepu8_epi16(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + kMins + c * 32)));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const int32_t* su = sums + (t * nb + b) * kSidePerBlock;
          __m512i macc = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c)
            macc = _mm512_dpwssd_epi32(macc, mw[c], _mm512_set1_epi32(su[c]));
          const __m512 da = _mm512_set1_ps(x[t * nb + b].d);
          accf[p][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[p][t]), _mm512_mul_ps(dv, da), accf[p][t]);
          accf[p][t] =
              _mm512_fnmadd_ps(_mm512_cvtepi32_ps(macc), _mm512_mul_ps(dminv, da), accf[p][t]);
        }
      }
    }
  }
};

}  // namespace

size_t panel_gemm_min_tokens() {
  return g_min_tokens.load(std::memory_order_relaxed);
}

void set_panel_gemm_min_tokens(size_t n) {
  g_min_tokens.store(n, std::memory_order_relaxed);
}

bool uses_panel_gemm(const WeightMatrix& w, size_t n_tokens) {
  const size_t min_tokens = panel_gemm_min_tokens();
  const CpuFeatures& f = cpu_features();
  if (min_tokens == 0) return false;
  if (w.panels != nullptr) return true;  // packed at load: no packing left to amortise
  // BF16's tiles are dot instructions already, so the panels pay from more tokens (Zen 4:
  // 0.7-1.0x at 16 tokens, 1.0-1.15x at 32, 1.3x at 512).
  if (w.dtype == DType::BF16) return f.avx512bf16 && w.cols % 32 == 0 && n_tokens >= min_tokens * 8;
  if (!(is_block32_quant(w.dtype) || is_kquant(w.dtype)) || !f.avx512vnni) return false;
  // Unpacking a K-quant block costs more, so fewer tokens share it (measured on Zen 4: Q4_K and
  // Q5_K gain 1.3x at 8 tokens, Q6_K loses up to 0.75x at 8 and gains 1.7x at 32; Q2_K and
  // Q3_K 0.64-0.77x at 8, 0.88-1.01x at 16, 1.55-1.76x at 32).
  const size_t scale = w.dtype == DType::Q2_K || w.dtype == DType::Q3_K ? 8
                       : w.dtype == DType::Q6_K                         ? 4
                       : is_kquant(w.dtype)                             ? 2
                                                                        : 1;
  return n_tokens >= min_tokens * scale;
}

std::shared_ptr<const void> pack_panels_vnni_avx512(ThreadPool& pool, const WeightMatrix& w) {
  if (!cpu_features().avx512vnni) return nullptr;
  if (w.dtype == DType::Q8_0) return pack_all<Block32Format<DType::Q8_0>>(pool, w);
  if (w.dtype == DType::Q4_0) return pack_all<Block32NibbleFormat<DType::Q4_0, 1, 1>>(pool, w);
  if (w.dtype == DType::Q4_1) return pack_all<Block32NibbleFormat<DType::Q4_1, 1, 1>>(pool, w);
  if (w.dtype == DType::Q5_0) return pack_all<Block32NibbleFormat<DType::Q5_0, 1, 1>>(pool, w);
  if (w.dtype == DType::Q5_1) return pack_all<Block32NibbleFormat<DType::Q5_1, 1, 1>>(pool, w);
  if (w.dtype == DType::IQ4_NL) return pack_all<Block32NibbleFormat<DType::IQ4_NL, 1, 1>>(pool, w);
  if (w.dtype == DType::IQ4_XS) return pack_all<Block32NibbleFormat<DType::IQ4_XS, 1, 1>>(pool, w);
  if (w.dtype == DType::MXFP4) return pack_all<Block32NibbleFormat<DType::MXFP4, 1, 1>>(pool, w);
  if (w.dtype == DType::Q4_K) return pack_all<Q4KNibbleFormat<1, 1>>(pool, w);
  return nullptr;
}

namespace {

// The 4- and 5-bit 32-block types: their load-time nibble panels where the matrix has them, up
// to kNibbleMaxTokens tokens (one panel and token per tile for decode); else, and for longer
// prefills, panels packed per call as bytes from the rows, which unpack once for 6 tokens
// (Zen 4, 2 threads, 2048 x 8192: nibbles 1.4-1.9x at 2 tokens, 2-3x at 8, 0.6-1.0x at 512).
constexpr size_t kNibbleMaxTokens = 32;

template <DType D>
void gemm_block32(ThreadPool& pool, const WeightMatrix& w, const ActQ8* x, size_t nb,
                  size_t n_tokens, float* y) {
  if (w.panels == nullptr || n_tokens >= kNibbleMaxTokens) {
    WeightMatrix rows = w;
    rows.panels = nullptr;
    return gemm<Block32Format<D>>(pool, rows, x, nb, n_tokens, y);
  }
  if (n_tokens <= kDecodeTokens)
    return gemm<Block32NibbleFormat<D, 1, 1>>(pool, w, x, nb, n_tokens, y);
  return gemm<Block32NibbleFormat<D, 2, 4>>(pool, w, x, nb, n_tokens, y);
}

}  // namespace

void gemm_vnni_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y) {
  const size_t nb = x.blocks_per_token;
  switch (w.dtype) {
    case DType::Q8_0:
      return gemm<Block32Format<DType::Q8_0>>(pool, w, x.q8, nb, n_tokens, y);
    case DType::Q4_0:
      return gemm_block32<DType::Q4_0>(pool, w, x.q8, nb, n_tokens, y);
    case DType::Q4_1:
      return gemm_block32<DType::Q4_1>(pool, w, x.q8, nb, n_tokens, y);
    case DType::Q5_0:
      return gemm_block32<DType::Q5_0>(pool, w, x.q8, nb, n_tokens, y);
    case DType::Q5_1:
      return gemm_block32<DType::Q5_1>(pool, w, x.q8, nb, n_tokens, y);
    case DType::IQ4_NL:
      return gemm_block32<DType::IQ4_NL>(pool, w, x.q8, nb, n_tokens, y);
    case DType::IQ4_XS:
      return gemm_block32<DType::IQ4_XS>(pool, w, x.q8, nb, n_tokens, y);
    case DType::MXFP4:
      return gemm_block32<DType::MXFP4>(pool, w, x.q8, nb, n_tokens, y);
    case DType::Q4_K:
      if (w.panels != nullptr) {
        if (n_tokens <= kDecodeTokens)
          return gemm<Q4KNibbleFormat<1, 1>>(pool, w, x.q8k, nb, n_tokens, y);
        return gemm<Q4KNibbleFormat<2, 2>>(pool, w, x.q8k, nb, n_tokens, y);
      }
      return gemm<KquantFormat<DType::Q4_K>>(pool, w, x.q8k, nb, n_tokens, y);
    case DType::Q2_K:
      return gemm<KquantFormat<DType::Q2_K>>(pool, w, x.q8k, nb, n_tokens, y);
    case DType::Q3_K:
      return gemm<KquantFormat<DType::Q3_K>>(pool, w, x.q8k, nb, n_tokens, y);
    case DType::Q5_K:
      return gemm<KquantFormat<DType::Q5_K>>(pool, w, x.q8k, nb, n_tokens, y);
    case DType::Q6_K:
      return gemm<KquantFormat<DType::Q6_K>>(pool, w, x.q8k, nb, n_tokens, y);
    default:
      fail("gemm_vnni_avx512: {} has no integer-dot GEMM", dtype_info(w.dtype).name);
  }
}

}  // namespace pith::kernels

#pragma GCC pop_options
