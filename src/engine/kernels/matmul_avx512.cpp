// AVX-512 matmul kernels (F/BW/VL/DQ), with AVX512_BF16 (vdpbf16ps) for BF16 weights and
// AVX512_VNNI (vpdpbusd) for the 32-block quants (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) where the CPU
// has them.
//
// Same loop nest and math as matmul_avx2.cpp (see there; decode prefetches kStreamAheadBytes
// ahead along its rows, in byte-sized row tasks), with:
//   - float weights: 16-lane FMA tiles of 4 rows x 4 tokens, masked loads for the K tail;
//   - BF16 with AVX512_BF16: activations packed to bf16 (already rounded to bf16 by the
//     front end, so the products are the same as the FMA path's) and vdpbf16ps, 32 products
//     per instruction;
//   - 32-block quants: 256-bit integer dot products, one block per vector, using the 32 vector
//     registers for 4x4 tiles and vpdpbusd (VNNI) in place of maddubs+madd when present.
//     (Zen 4 splits 512-bit integer ops in two, so 256-bit vectors lose nothing there and keep
//     the 34-byte block layout simple.)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves, which
// -Wuninitialized reports inside every inlined intrinsic (GCC bug 105593); before any include.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/kernels/block32_avx2.h"
#include "engine/kernels/matmul_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")

namespace pith::kernels {

namespace {

inline float hsum512(__m512 v) {
  return _mm512_reduce_add_ps(v);
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- float weights: 16 elements at k, the first `n` of them (n ≤ 16), zero-filled ----

template <DType D>
inline __m512 load_w16(const uint8_t* row, size_t k, __mmask16 m) {
  if constexpr (D == DType::F32)
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  if constexpr (D == DType::F16)
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  if constexpr (D == DType::BF16) {
    __m512i v = _mm512_cvtepu16_epi32(
        _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
}

// Software prefetch for streaming decode: kStreamAheadBytes ahead along each of the R rows.
template <int R>
inline void prefetch_ahead(const uint8_t* w0, size_t w_stride, size_t byte_offset) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(w0 + r * w_stride + byte_offset + kStreamAheadBytes),
                 _MM_HINT_T0);
}

template <DType D, int R, int T, bool kStream = false>
void tile_float(const uint8_t* w0, size_t w_stride, const float* x0, size_t k_total, float* y0,
                size_t ldy) {
  constexpr size_t kElem = D == DType::F32 ? 4 : 2;
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (size_t k = 0; k < k_total; k += 16) {
    if constexpr (kStream) {
      if ((k * kElem) % 64 == 0) prefetch_ahead<R>(w0, w_stride, k * kElem);
    }
    const size_t left = k_total - k;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m512 xv[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x0 + t * k_total + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512 wv = load_w16<D>(w0 + r * w_stride, k, m);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y0[t * ldy + r] = hsum512(acc[r][t]);
}

// ---- quantised weights against int8 activations (256-bit, one 32-block per vector;
// load_block32 in block32_avx2.h) ----

// Block b of a row as unsigned levels where the type allows (see tile_q8_avx512.inc): Q4_0's and
// Q5_0's q as stored, Q5_1's likewise; Q5's fifth bits set from the 32-bit mask in one masked
// op (AVX512BW/VL) instead of AVX2's byte spread and compare. Q8_0 and Q4_1 as load_block32.
template <DType D>
inline __m256i load_levels32(const uint8_t* row, size_t b, float* d, float* m) {
  const uint8_t* p = row + b * kBlock32Bytes<D>;
  if constexpr (D == DType::Q4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(p);
    *d = _cvtsh_ss(blk->d), *m = 0.0f;
    return nibbles32(blk->qs);
  } else if constexpr (D == DType::Q5_0 || D == DType::Q5_1) {
    using Block = std::conditional_t<D == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const auto* blk = reinterpret_cast<const Block*>(p);
    *d = _cvtsh_ss(blk->d);
    if constexpr (D == DType::Q5_1)
      *m = _cvtsh_ss(blk->m);
    else
      *m = 0.0f;
    const __m256i lo = nibbles32(blk->qs);
    return _mm256_mask_add_epi8(lo, static_cast<__mmask32>(q5_high_bits(blk->qh)), lo,
                                _mm256_set1_epi8(0x10));
  } else {
    return load_block32<D>(row, b, d, m);
  }
}

// tile_q8<D, R, T>, compiled twice: without and with AVX512_VNNI (an inlined helper cannot
// have a wider target than its caller, so each variant is a whole tile with its own target).
#define PITH_DOT_I8(wabs, xs) \
  _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, xs), _mm256_set1_epi16(1))
namespace plain {
#include "engine/kernels/tile_q8_avx512.inc"
}  // namespace plain
#undef PITH_DOT_I8

#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define PITH_DOT_I8(wabs, xs) _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, xs)
namespace vnni {
#include "engine/kernels/tile_q8_avx512.inc"
}  // namespace vnni
#undef PITH_DOT_I8
#pragma GCC pop_options

// The loop nest of matmul_avx2.cpp; tile<R, T, kStream>(r, t) is one of the micro-kernels
// above. Decode (n_tokens ≤ TMax) runs byte-sized row tasks whose tiles prefetch ahead along
// their rows (kStream). Unlike the AVX2 path it keeps R-row tiles: with one row, a single
// accumulator chain per token would bound a core to one 64-byte vector per FMA latency.
// (Not measured on an AVX-512 machine: the VM this was written on has AVX2 only.)
template <int RMax, int TMax, typename TileFn>
void tiled(ThreadPool& pool, const WeightMatrix& w, size_t n_tokens, size_t x_row_bytes,
           TileFn&& tile) {
  const size_t rows = w.rows;
  if (n_tokens <= size_t(TMax)) {
    const size_t row_block = decode_row_block(w, pool.size(), RMax);
    const int nt = static_cast<int>(n_tokens);
    pool.parallel_for((rows + row_block - 1) / row_block, [&](size_t task, size_t) {
      const size_t r_begin = task * row_block, r_end = std::min(rows, r_begin + row_block);
      for (size_t r = r_begin; r < r_end; r += RMax) {
        const int nr = static_cast<int>(std::min<size_t>(RMax, r_end - r));
        for_tile<RMax, TMax>(nr, nt,
                             [&]<int R, int T>() { tile.template operator()<R, T, true>(r, 0); });
      }
    });
    return;
  }
  size_t chunk = std::max<size_t>(TMax, (size_t{128} << 10) / x_row_bytes / TMax * TMax);
  chunk = std::min(chunk, n_tokens);
  const size_t row_block = 64;
  const size_t n_tasks = (rows + row_block - 1) / row_block;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r_begin = task * row_block, r_end = std::min(rows, r_begin + row_block);
    for (size_t t0 = 0; t0 < n_tokens; t0 += chunk) {
      const size_t t_end = std::min(n_tokens, t0 + chunk);
      for (size_t r = r_begin; r < r_end; r += RMax) {
        const int nr = static_cast<int>(std::min<size_t>(RMax, r_end - r));
        for (size_t t = t0; t < t_end; t += TMax) {
          const int nt = static_cast<int>(std::min<size_t>(TMax, t_end - t));
          for_tile<RMax, TMax>(
              nr, nt, [&]<int R, int T>() { tile.template operator()<R, T, false>(r, t); });
        }
      }
    }
  });
}

template <DType D>
void matmul_float(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                  float* y) {
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const size_t wstride = w.row_bytes(), rows = w.rows, cols = w.cols;
  tiled<4, 4>(pool, w, n_tokens, cols * sizeof(float),
              [&]<int R, int T, bool S>(size_t r, size_t t) {
                tile_float<D, R, T, S>(wdata + r * wstride, wstride, x.f32 + t * cols, cols,
                                       y + t * rows + r, rows);
              });
}

template <DType D, bool kVnni>
void matmul_quant(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                  float* y) {
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const size_t wstride = w.row_bytes(), rows = w.rows, nb = x.blocks_per_token;
  // Q4_0 / Q5_0 levels are used unsigned: -offset * Σ a per token and block (tile_q8_avx512.inc).
  thread_local std::vector<int32_t> corr_buf;
  const int32_t* corr = nullptr;
  if constexpr (D == DType::Q4_0 || D == DType::Q5_0) {
    constexpr int32_t kOffset = D == DType::Q4_0 ? 8 : 16;
    corr_buf.resize(n_tokens * nb);
    for (size_t i = 0; i < n_tokens * nb; ++i) corr_buf[i] = -kOffset * act_q8_sum(x.q8[i]);
    corr = corr_buf.data();
  }
  tiled<4, 4>(pool, w, n_tokens, nb * sizeof(ActQ8), [&]<int R, int T, bool S>(size_t r, size_t t) {
    const int32_t* c = corr ? corr + t * nb : nullptr;
    if constexpr (kVnni)
      vnni::tile_q8<D, R, T, S>(wdata + r * wstride, wstride, x.q8 + t * nb, c, nb,
                                y + t * rows + r, rows);
    else
      plain::tile_q8<D, R, T, S>(wdata + r * wstride, wstride, x.q8 + t * nb, c, nb,
                                 y + t * rows + r, rows);
  });
}

}  // namespace

#pragma GCC push_options
#pragma GCC target("avx512bf16")
namespace {

// BF16 x BF16 with vdpbf16ps: 16 lanes, each the sum of 2 adjacent products, 32 elements/step.
// `xb` holds the bf16 activations [n_tokens][cols].
template <int R, int T, bool kStream = false>
void tile_bf16_dp(const uint8_t* w0, size_t w_stride, const uint16_t* xb, size_t k_total, float* y0,
                  size_t ldy) {
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (size_t k = 0; k < k_total; k += 32) {
    if constexpr (kStream) prefetch_ahead<R>(w0, w_stride, k * 2);
    const size_t left = k_total - k;
    const __mmask32 m = left >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << left) - 1);
    __m512bh xv[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, xb + t * k_total + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(
          m, reinterpret_cast<const uint16_t*>(w0 + r * w_stride) + k);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y0[t * ldy + r] = hsum512(acc[r][t]);
}

void matmul_bf16_dp(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                    float* y) {
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const size_t wstride = w.row_bytes(), rows = w.rows, cols = w.cols;
  tiled<4, 4>(pool, w, n_tokens, cols * sizeof(uint16_t),
              [&]<int R, int T, bool S>(size_t r, size_t t) {
                tile_bf16_dp<R, T, S>(wdata + r * wstride, wstride, x.bf16 + t * cols, cols,
                                      y + t * rows + r, rows);
              });
}

}  // namespace
#pragma GCC pop_options

void matmul_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                   float* y, size_t path_tokens) {
  const CpuFeatures& f = cpu_features();
  if (uses_panel_gemm(w, path_tokens)) {
    if (w.dtype != DType::BF16) return gemm_vnni_avx512(pool, w, x, n_tokens, y);
    if (x.bf16 != nullptr) return gemm_bf16_avx512(pool, w, x, n_tokens, y);
  }
  switch (w.dtype) {
    case DType::F32:
      return matmul_float<DType::F32>(pool, w, x, n_tokens, y);
    case DType::F16:
      return matmul_float<DType::F16>(pool, w, x, n_tokens, y);
    case DType::BF16:
      if (f.avx512bf16 && x.bf16 != nullptr) return matmul_bf16_dp(pool, w, x, n_tokens, y);
      return matmul_float<DType::BF16>(pool, w, x, n_tokens, y);
    case DType::Q8_0:
      return f.avx512vnni ? matmul_quant<DType::Q8_0, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::Q8_0, false>(pool, w, x, n_tokens, y);
    case DType::Q4_0:
      return f.avx512vnni ? matmul_quant<DType::Q4_0, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::Q4_0, false>(pool, w, x, n_tokens, y);
    case DType::Q4_1:
      return f.avx512vnni ? matmul_quant<DType::Q4_1, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::Q4_1, false>(pool, w, x, n_tokens, y);
    case DType::Q5_0:
      return f.avx512vnni ? matmul_quant<DType::Q5_0, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::Q5_0, false>(pool, w, x, n_tokens, y);
    case DType::Q5_1:
      return f.avx512vnni ? matmul_quant<DType::Q5_1, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::Q5_1, false>(pool, w, x, n_tokens, y);
    case DType::IQ4_NL:
      return f.avx512vnni ? matmul_quant<DType::IQ4_NL, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::IQ4_NL, false>(pool, w, x, n_tokens, y);
    case DType::IQ4_XS:
      return f.avx512vnni ? matmul_quant<DType::IQ4_XS, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::IQ4_XS, false>(pool, w, x, n_tokens, y);
    case DType::MXFP4:
      return f.avx512vnni ? matmul_quant<DType::MXFP4, true>(pool, w, x, n_tokens, y)
                          : matmul_quant<DType::MXFP4, false>(pool, w, x, n_tokens, y);
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      // No AVX-512 K-quant kernel yet: every AVX-512 CPU runs the AVX2 one.
      return matmul_avx2(pool, w, x, n_tokens, y);
  }
}

}  // namespace pith::kernels

#pragma GCC pop_options
