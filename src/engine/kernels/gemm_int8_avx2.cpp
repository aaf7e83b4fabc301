// The compute-bound path of matmul on AVX2 CPUs (prefill and decode batches) for the quantised
// dtypes (the K-quants Q2_K..Q6_K and the 32-block Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): integer dot
// products on 8-row panels.
//
// Why not the f32 GEMM (gemm_avx2.cpp) the other dtypes take: it is bound by f32 FMA, 8
// multiply-adds per instruction, and ran at ~0.8 of that peak. vpmaddubsw does 32 multiply-adds
// of unsigned by signed bytes into int16 pairs. The K-quants' levels are small unsigned integers
// (at most 6 bits; the 4/5-bit 32-block quants likewise), so two groups' products can be summed
// in int16 before vpmaddwd applies the unit's scale and widens to int32: per token, 64
// multiply-adds x 8 rows cost 2 maddubs + 1 int16 add + 1 madd + 1 int32 add, where f32 FMA needs
// 64 FMAs. Q8_0's levels are signed, so each group takes the sign trick (|w| against a with w's
// sign) and its own madd: 4 ops per 32 multiply-adds x 8 rows, which still runs ~1.4x the f32 GEMM
// (the integer ops spread over more ports than FMA). The panel layout is the AVX-512 VNNI one
// (gemm_vnni_avx512.cpp) at half the width: a 32-byte group holds 4 columns of each of the 8 rows,
// and the token's 4 activation bytes are broadcast, so a tile's int32 lanes are the 8 rows' sums
// with no horizontal reduction.
//
// Packing (per task of up to kTaskPanels panels, all K, into the worker's scratch; reused by
// every token), per 8-row panel and 256-block of a K-quant (Format<D>):
//   the 256 levels as 64 groups of 32 bytes, group G holding for each row r the levels of
//     columns [4G, 4G + 4) (8 x 8 transposes of 32-bit words of kquant_levels' vectors);
//   per unit u (32 columns for Q4_K/Q5_K, 16 for the others) the int16 scale pairs
//     (sc[r][u], sc[r][u]) that vpmaddwd multiplies the int16 sums by;
//   per pair of activation sums the int16 offset weights: Q4_K/Q5_K's unit mins m against the
//     units' 32-sums (made per call); Q2_K's m, Q3_K's 4 sc and Q6_K's 32 sc (their levels are
//     q + 4 and q + 32) against the 16-sums (ActQ8K::bsums);
//   d and dmin per row (f32; Q3_K/Q6_K subtract their offsets in int32 instead).
// Per block: acc = Σ_u sc_u Σ q·a, off = Σ_j o_j sum_j (exact int32), then
// y += d_a (d acc - dmin off): the math of dot_q*k_scalar, only the f32 summation order differs.
// The 32-block quants (Block32Format): per block the 8 groups of quants, then d (and m) per row.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "engine/kernels/block32_avx2.h"
#include "engine/kernels/kquant_avx2.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"
#include "formats/kquants.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pith::kernels {

namespace {

constexpr size_t kPanelRows = 8;
// Rows packed per task at most: 8 panels, fewer when the rows are long so that a task's panels
// stay within kTaskPanelBytes of L2.
constexpr size_t kTaskPanels = 8;
constexpr size_t kTaskPanelBytes = size_t{256} << 10;

template <DType D>
struct Format {
  static constexpr bool kBigUnits = D == DType::Q4_K || D == DType::Q5_K;
  static constexpr int kUnit = kBigUnits ? 32 : 16;
  static constexpr int kUnits = static_cast<int>(kQK) / kUnit;
  static constexpr int kGroupsPerUnit = kUnit / 4;
  // The tiles sum two groups' maddubs results in int16 before the unit's scale: each lane at
  // most 2 x 2 x 63 x 127 < 2^15 (Q6_K's 6-bit levels; longer int16 chains, possible for the
  // smaller levels, measured slower).
  static_assert(kGroupsPerUnit % 2 == 0);
  // Q3_K and Q6_K: offsets in d's units, subtracted in int32.
  static constexpr bool kIntOffset = D == DType::Q3_K || D == DType::Q6_K;
  static constexpr size_t kScales = 64 * 32;
  static constexpr size_t kOffsets = kScales + kUnits * 32;
  // Pairs of activation sums per block: the 32-sums of Q4_K/Q5_K's units, else the 16-sums.
  static constexpr int kOffsetPairs = kBigUnits ? 4 : 8;
  static constexpr size_t kD = kOffsets + kOffsetPairs * 32;
  static constexpr size_t kDmin = kD + 32;
  static constexpr size_t kBytes = kDmin + 32;
};

// One block's unit scales sc[u], the weights o[j] of the activation 16-sums, d and dmin.
template <DType D>
void block_scales(const uint8_t* blk, int16_t sc[16], int16_t o[16], float* d, float* dmin) {
  if constexpr (D == DType::Q2_K) {
    const auto* w = reinterpret_cast<const BlockQ2_K*>(blk);
    for (int j = 0; j < 16; ++j) sc[j] = w->scales[j] & 15, o[j] = w->scales[j] >> 4;
    *d = _cvtsh_ss(w->d), *dmin = _cvtsh_ss(w->dmin);
  } else if constexpr (D == DType::Q3_K) {
    const auto* w = reinterpret_cast<const BlockQ3_K*>(blk);
    int8_t s[16];
    unpack_q3k_scales(w->scales, s);
    for (int j = 0; j < 16; ++j) sc[j] = s[j], o[j] = static_cast<int16_t>(4 * s[j]);
    *d = *dmin = _cvtsh_ss(w->d);
  } else if constexpr (D == DType::Q6_K) {
    const auto* w = reinterpret_cast<const BlockQ6_K*>(blk);
    for (int j = 0; j < 16; ++j)
      sc[j] = w->scales[j], o[j] = static_cast<int16_t>(32 * w->scales[j]);
    *d = *dmin = _cvtsh_ss(w->d);
  } else {
    using Block = std::conditional_t<D == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
    const auto* w = reinterpret_cast<const Block*>(blk);
    uint8_t s[8], m[8];
    unpack_q4k_scales(w->scales, s, m);
    for (int u = 0; u < 8; ++u) sc[u] = s[u], o[u] = m[u];
    *d = _cvtsh_ss(w->d), *dmin = _cvtsh_ss(w->dmin);
  }
}

// Rows [0, n_rows) (n_rows ≤ 8; the rest zero) of nb blocks from w0 into one panel at dst.
template <DType D>
void pack_panel(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
  using F = Format<D>;
  for (size_t b = 0; b < nb; ++b, dst += F::kBytes) {
    __m256i q[kPanelRows][8];
    int16_t sc[kPanelRows][16] = {}, o[kPanelRows][16] = {};
    float* d = reinterpret_cast<float*>(dst + F::kD);
    float* dmin = reinterpret_cast<float*>(dst + F::kDmin);
    for (size_t r = 0; r < kPanelRows; ++r) {
      d[r] = dmin[r] = 0.0f;
      if (r >= n_rows) {
        for (int j = 0; j < 8; ++j) q[r][j] = _mm256_setzero_si256();
        continue;
      }
      const uint8_t* blk = w0 + r * w_stride + b * kKBlockBytes<D>;
      kquant_levels<D>(blk, q[r]);
      block_scales<D>(blk, sc[r], o[r], &d[r], &dmin[r]);
    }
    for (int j = 0; j < 8; ++j) {
      __m256i v[8];
      for (size_t r = 0; r < kPanelRows; ++r) v[r] = q[r][j];
      avx2::transpose8x8_epi32(v);
      for (int g = 0; g < 8; ++g)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (8 * j + g) * 32), v[g]);
    }
    auto* scales = reinterpret_cast<int16_t*>(dst + F::kScales);
    auto* offsets = reinterpret_cast<int16_t*>(dst + F::kOffsets);
    for (size_t r = 0; r < kPanelRows; ++r) {
      for (int u = 0; u < F::kUnits; ++u)
        scales[u * 16 + 2 * r] = scales[u * 16 + 2 * r + 1] = sc[r][u];
      for (int c = 0; c < F::kOffsetPairs; ++c) {
        offsets[c * 16 + 2 * r] = o[r][2 * c];
        offsets[c * 16 + 2 * r + 1] = o[r][2 * c + 1];
      }
    }
  }
}

// y[t * ldy + lane] = acc[t] lane, for the `valid` real rows of the panel.
template <int T>
void store_tile(const __m256 (&acc)[T], float* y, size_t ldy, size_t valid) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    if (valid == kPanelRows) {
      _mm256_storeu_ps(y + t * ldy, acc[t]);
    } else {
      alignas(32) float tmp[kPanelRows];
      _mm256_store_ps(tmp, acc[t]);
      std::memcpy(y + t * ldy, tmp, valid * sizeof(float));
    }
  }
}

// y[t * ldy + lane] = the panel's rows against token t, for T tokens over nb blocks; `valid`
// rows (the panel's real ones) are stored.
template <DType D, int T>
void tile_kquant(const uint8_t* panel, const ActQ8K* x, const int32_t* sums32, size_t nb, float* y,
                 size_t ldy, size_t valid) {
  using F = Format<D>;
  __m256 accf[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) accf[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + b * F::kBytes;
    __m256i acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
    for (int u = 0; u < F::kUnits; ++u) {
      const __m256i sc =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + F::kScales + u * 32));
#pragma GCC unroll 4
      for (int g = 0; g < F::kGroupsPerUnit; g += 2) {
        const int group = u * F::kGroupsPerUnit + g;
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + group * 32));
        const __m256i w1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + group * 32 + 32));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t a[2];
          std::memcpy(a, x[t * nb + b].qs + 4 * group, 8);
          const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(a[0])),
                                             _mm256_maddubs_epi16(w1, _mm256_set1_epi32(a[1])));
          acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(s, sc));
        }
      }
    }
    // The offsets: Σ_j o_j sum_j over the unit sums, two per madd.
    __m256i off[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) off[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < F::kOffsetPairs; ++c) {
      const __m256i ow =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + F::kOffsets + c * 32));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        if constexpr (F::kBigUnits)
          pair = sums32[(t * nb + b) * F::kOffsetPairs + c];
        else
          std::memcpy(&pair, x[t * nb + b].bsums + 2 * c, 4);
        off[t] = _mm256_add_epi32(off[t], _mm256_madd_epi16(ow, _mm256_set1_epi32(pair)));
      }
    }
    const float* dp = reinterpret_cast<const float*>(blk + F::kD);
    const __m256 d = _mm256_loadu_ps(dp);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      __m256 v;
      if constexpr (F::kIntOffset) {
        v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t], off[t])));
      } else {
        v = _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(acc[t]),
                            _mm256_mul_ps(_mm256_loadu_ps(dp + 8), _mm256_cvtepi32_ps(off[t])));
      }
      accf[t] = _mm256_fmadd_ps(v, _mm256_set1_ps(x[t * nb + b].d), accf[t]);
    }
  }
  store_tile<T>(accf, y, ldy, valid);
}

// The K-quants in the loop nest's terms (below).
template <DType D>
struct KquantFormat {
  using Act = ActQ8K;
  static constexpr size_t kCols = kQK;
  // Tokens per tile (4 int32 sums live beside the two weight vectors; 6 tokens, or 2 panels x
  // 3 tokens, measured slower).
  static constexpr int kTileTokens = 4;
  static constexpr size_t kBytes = Format<D>::kBytes;
  // Q4_K/Q5_K: each activation unit's sum, as int16 pairs (sum 2c, sum 2c + 1) in word c.
  static constexpr size_t kSideWords = Format<D>::kBigUnits ? 4 : 0;
  static void side(const ActQ8K& a, int32_t* out) {
    for (int c = 0; c < 4; ++c) {
      const int16_t* bs = a.bsums + 4 * c;
      const auto lo = static_cast<uint16_t>(bs[0] + bs[1]);
      const auto hi = static_cast<uint16_t>(bs[2] + bs[3]);
      out[c] = static_cast<int32_t>(uint32_t{hi} << 16 | lo);
    }
  }
  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    pack_panel<D>(w0, w_stride, n_rows, nb, dst);
  }
  template <int T>
  static void tile(const uint8_t* panel, const ActQ8K* x, const int32_t* side, size_t nb, float* y,
                   size_t ldy, size_t valid) {
    tile_kquant<D, T>(panel, x, side, nb, y, ldy, valid);
  }
};

// ---- the 32-block quants: one unit of 32 per block ----
//
// Per panel and 32-block: the 8 groups of 32 bytes (group G: quants 4G..4G+3 of each row), then
// d per row (f32) and for Q4_1/Q5_1 m per row (f32).
//   Q8_0 (and IQ4_NL, IQ4_XS: their levels, |level| ≤ 127): the quants as stored. vpmaddubsw wants
//   one unsigned operand: |w| against a with w's
//     sign (vpsignb), each pair sum at most 2 x 128 x 127 < 2^15, but two of them no longer
//     fit int16, so each group is widened by a madd with ones.
//   Q4_0, Q5_0: the unsigned levels q (value d (q - 8), d (q - 16)); the block's int32 sum
//     starts at -8 (-16) x Σ a, Σ a made per call. Q4_1, Q5_1: the levels q (value d q + m);
//     + m s_a per block (ActQ8::s, as the integer tiles do). Levels of at most 5 bits: two
//     groups' products are summed in int16 (2 x 2 x 31 x 127 < 2^15) before the madd.
template <DType D>
struct Block32Format {
  using Act = ActQ8;
  static constexpr size_t kCols = 32;
  static constexpr bool kSigned = D == DType::Q8_0 || is_iq4(D);
  static constexpr bool kMin = has_block_min(D);
  static constexpr int32_t kOffset = D == DType::Q4_0 ? 8 : D == DType::Q5_0 ? 16 : 0;
  // 3 tokens per tile for Q8_0: 2-5 % over 4 and 6 (`bench matmul --dtype q8_0 --isa avx2`, 64
  // and 512 tokens, three interleaved rounds), 8 slower still.
  static constexpr int kTileTokens = kSigned ? 3 : 4;
  static constexpr size_t kD = 8 * 32, kM = kD + 32;
  static constexpr size_t kBytes = kM + (kMin ? 32 : 0);
  // Q4_0/Q5_0: the start of each block's int32 sum, -offset x Σ a.
  static constexpr size_t kSideWords = kOffset != 0 ? 1 : 0;
  static void side(const ActQ8& a, int32_t* out) { out[0] = -kOffset * act_q8_sum(a); }

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    for (size_t b = 0; b < nb; ++b, dst += kBytes) {
      __m256i v[8];
      float* d = reinterpret_cast<float*>(dst + kD);
      float* m = reinterpret_cast<float*>(dst + kM);
      for (size_t r = 0; r < kPanelRows; ++r) {
        v[r] = _mm256_setzero_si256();
        float dr = 0.0f, mr = 0.0f;  // a padded row: all zero
        if (r < n_rows) {
          v[r] = load_block32<D>(w0 + r * w_stride, b, &dr, &mr);
          if constexpr (kOffset != 0) v[r] = _mm256_add_epi8(v[r], _mm256_set1_epi8(kOffset));
        }
        d[r] = dr;
        if constexpr (kMin) m[r] = mr;
      }
      avx2::transpose8x8_epi32(v);
      for (int g = 0; g < 8; ++g)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + g * 32), v[g]);
    }
  }

  template <int T>
  static void tile(const uint8_t* panel, const ActQ8* x, const int32_t* side, size_t nb, float* y,
                   size_t ldy, size_t valid) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 accf[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) accf[t] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panel + b * kBytes;
      __m256i acc[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[t] = kOffset != 0 ? _mm256_set1_epi32(side[t * nb + b]) : _mm256_setzero_si256();
      if constexpr (kSigned) {
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + g * 32));
          const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            int32_t a4;
            std::memcpy(&a4, x[t * nb + b].qs + 4 * g, 4);
            const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(a4), w));
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p, ones));
          }
        }
      } else {
#pragma GCC unroll 4
        for (int g = 0; g < 8; g += 2) {
          const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + g * 32));
          const __m256i w1 =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + g * 32 + 32));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            int32_t a[2];
            std::memcpy(a, x[t * nb + b].qs + 4 * g, 8);
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(a[0])),
                                               _mm256_maddubs_epi16(w1, _mm256_set1_epi32(a[1])));
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(s, ones));
          }
        }
      }
      const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(blk + kD));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const ActQ8& a = x[t * nb + b];
        accf[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), _mm256_mul_ps(d, _mm256_set1_ps(a.d)),
                                  accf[t]);
        if constexpr (kMin)
          accf[t] = _mm256_fmadd_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(blk + kM)),
                                    _mm256_set1_ps(a.s), accf[t]);
      }
    }
    store_tile<T>(accf, y, ldy, valid);
  }
};

// Rows [r_begin, r_end) x n_tokens tokens (x: the first token's activation blocks) on the
// calling thread into y[t * ldy + (r - r_begin)].
template <typename F>
void rows_impl(const WeightMatrix& w, const typename F::Act* x, size_t n_tokens, size_t r_begin,
               size_t r_end, float* y, size_t ldy) {
  const size_t nb = w.cols / F::kCols, panel_bytes = nb * F::kBytes;
  const size_t task_panels = std::clamp<size_t>(kTaskPanelBytes / panel_bytes, 1, kTaskPanels);
  const size_t task_rows = task_panels * kPanelRows;
  constexpr int kTileTokens = F::kTileTokens;
  // Tokens per pass over a task's panels: their activations (~128 KiB) stay in L2.
  size_t chunk = std::max<size_t>(
      kTileTokens, (size_t{128} << 10) / (nb * sizeof(*x)) / kTileTokens * kTileTokens);
  chunk = std::min(chunk, n_tokens);
  thread_local std::vector<int32_t> side;
  if constexpr (F::kSideWords > 0) {
    if (side.size() < n_tokens * nb * F::kSideWords) side.resize(n_tokens * nb * F::kSideWords);
    for (size_t i = 0; i < n_tokens * nb; ++i) F::side(x[i], side.data() + i * F::kSideWords);
  }
  thread_local std::vector<uint8_t> pack_buf;
  if (pack_buf.size() < task_panels * panel_bytes + 64)
    pack_buf.resize(task_panels * panel_bytes + 64);
  uint8_t* packed = pack_buf.data() + (-reinterpret_cast<uintptr_t>(pack_buf.data()) & 63);
  for (size_t r0 = r_begin; r0 < r_end; r0 += task_rows) {
    const size_t nr = std::min(task_rows, r_end - r0);
    const size_t n_panels = (nr + kPanelRows - 1) / kPanelRows;
    for (size_t p = 0; p < n_panels; ++p) {
      const size_t r = r0 + p * kPanelRows;
      F::pack(w.row(r), w.row_bytes(), std::min(kPanelRows, r0 + nr - r), nb,
              packed + p * panel_bytes);
    }
    for (size_t t0 = 0; t0 < n_tokens; t0 += chunk) {
      const size_t t_end = std::min(n_tokens, t0 + chunk);
      for (size_t p = 0; p < n_panels; ++p) {
        const size_t r = r0 + p * kPanelRows, valid = std::min(kPanelRows, r0 + nr - r);
        for (size_t t = t0; t < t_end; t += kTileTokens) {
          const int nt = static_cast<int>(std::min<size_t>(kTileTokens, t_end - t));
          for_tile<1, kTileTokens>(1, nt, [&]<int, int T>() {
            F::template tile<T>(packed + p * panel_bytes, x + t * nb,
                                F::kSideWords > 0 ? side.data() + t * nb * F::kSideWords : nullptr,
                                nb, y + t * ldy + (r - r_begin), ldy, valid);
          });
        }
      }
    }
  }
}

}  // namespace

bool has_int8_gemm_avx2(DType dtype) {
  return is_kquant(dtype) || is_block32_quant(dtype);
}

void gemm_int8_avx2_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                         size_t r_begin, size_t r_end, float* y, size_t ldy) {
  const size_t n = t_end - t_begin, first = t_begin * x.blocks_per_token;
  switch (w.dtype) {
    case DType::Q8_0:
      return rows_impl<Block32Format<DType::Q8_0>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::Q4_0:
      return rows_impl<Block32Format<DType::Q4_0>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::Q4_1:
      return rows_impl<Block32Format<DType::Q4_1>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::Q5_0:
      return rows_impl<Block32Format<DType::Q5_0>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::Q5_1:
      return rows_impl<Block32Format<DType::Q5_1>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::IQ4_NL:
      return rows_impl<Block32Format<DType::IQ4_NL>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::IQ4_XS:
      return rows_impl<Block32Format<DType::IQ4_XS>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::MXFP4:
      return rows_impl<Block32Format<DType::MXFP4>>(w, x.q8 + first, n, r_begin, r_end, y, ldy);
    case DType::Q2_K:
      return rows_impl<KquantFormat<DType::Q2_K>>(w, x.q8k + first, n, r_begin, r_end, y, ldy);
    case DType::Q3_K:
      return rows_impl<KquantFormat<DType::Q3_K>>(w, x.q8k + first, n, r_begin, r_end, y, ldy);
    case DType::Q4_K:
      return rows_impl<KquantFormat<DType::Q4_K>>(w, x.q8k + first, n, r_begin, r_end, y, ldy);
    case DType::Q5_K:
      return rows_impl<KquantFormat<DType::Q5_K>>(w, x.q8k + first, n, r_begin, r_end, y, ldy);
    case DType::Q6_K:
      return rows_impl<KquantFormat<DType::Q6_K>>(w, x.q8k + first, n, r_begin, r_end, y, ldy);
    default:
      PITH_CHECK(false);
  }
}

void gemm_int8_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                    float* y) {
  constexpr size_t kRowsPerTask = kTaskPanels * kPanelRows;
  const size_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r0 = task * kRowsPerTask;
    gemm_int8_avx2_rows(w, x, 0, n_tokens, r0, std::min(w.rows, r0 + kRowsPerTask), y + r0, w.rows);
  });
}

}  // namespace pith::kernels

#pragma GCC pop_options
