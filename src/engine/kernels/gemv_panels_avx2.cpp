// Decode on AVX2 from load-time panels (weight_panels.h, the layouts the AVX-512 kernels read):
// Q4_K and BF16 products of 1-4 tokens.
//
// Q4_K: the row kernel (kquant_avx2.h) spends ~95 instructions per 256-quant block of one row:
// a scale shuffle and two multiplies per 32 quants, and per block the scale unpacking, a
// horizontal reduction and the f32 scaling, all per row. From the panels, one 32-byte load
// holds 4 quants of 8 rows: maddubs against the token's 4 activation bytes broadcast gives each
// row's pair sums, added in int16 over the unit's 8 groups (8 x 2 x 15 x 127 < 2^15), then one
// madd per unit applies 8 rows' scales at once; the mins, d and dmin are applied once per block
// for 8 rows. About 2.4x fewer instructions per weight byte, so the kernel outruns DRAM (the
// row kernel ran at ~41 GB/s from cache on 2 Zen 4 cores, 1.2x their DRAM read rate, and its
// decode reached 0.85-0.89 of the read floor). The integer sums are exact and the f32 steps
// are the VNNI kernel's, in its order, so both ISA levels give the same bits.
//
// BF16: a 32-byte load holds one column pair of 8 rows; a shift and an and widen both columns
// to f32 in place, two FMAs against the token's two activations broadcast. One sequential
// stream per task instead of the row tiles' four (the FFN down projection's 16 KiB rows
// streamed at ~2/3 of the short rows' rate), 5 ops per 32 bytes instead of ~8.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"
#include "formats/kquants.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "engine/kernels/weight_panels.h"

namespace pith::kernels {

namespace {

using panel_gemm::Bf16Panels;
using panel_gemm::kPanelRows;
using panel_gemm::Q4KPanels;

// One 16-row panel x T tokens (x and sums of token t at t * nb): y[t * ldy + row] for the
// panel's first `valid` rows.
template <int T>
void panel_tokens(const uint8_t* panel, size_t nb, const ActQ8K* x, const int32_t* sums, float* y,
                  size_t ldy, size_t valid) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  // The 8 scale bytes of rows 8h.. (broadcast to every 64-bit lane) -> (s, s) int16 pairs.
  const __m256i dup = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4,
                                       -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
  __m256 accf[2][T];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) accf[h][t] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + b * Q4KPanels::kBytes;
    __m256i acc[2][T];  // Σ_u sc_u · (Σ q a over unit u), rows 8h..
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256i lo16[2][T], hi16[2][T];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) lo16[h][t] = hi16[h][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const uint8_t* group = blk + (c * 8 + g) * 64;
        __m256i lo[2], hi[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32 * h));
          lo[h] = _mm256_and_si256(wv, nibble);
          hi[h] = _mm256_and_si256(_mm256_srli_epi16(wv, 4), nibble);
        }
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          const int8_t* qs = x[t * nb + b].qs + 64 * c + 4 * g;
          int32_t a_lo, a_hi;
          std::memcpy(&a_lo, qs, 4);
          std::memcpy(&a_hi, qs + 32, 4);
          const __m256i av_lo = _mm256_set1_epi32(a_lo), av_hi = _mm256_set1_epi32(a_hi);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            lo16[h][t] = _mm256_add_epi16(lo16[h][t], _mm256_maddubs_epi16(lo[h], av_lo));
            hi16[h][t] = _mm256_add_epi16(hi16[h][t], _mm256_maddubs_epi16(hi[h], av_hi));
          }
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const uint8_t* sc = blk + Q4KPanels::kScales + 8 * h;
        int64_t s_lo8, s_hi8;
        std::memcpy(&s_lo8, sc + 2 * c * 16, 8);
        std::memcpy(&s_hi8, sc + (2 * c + 1) * 16, 8);
        const __m256i s_lo = _mm256_shuffle_epi8(_mm256_set1_epi64x(s_lo8), dup);
        const __m256i s_hi = _mm256_shuffle_epi8(_mm256_set1_epi64x(s_hi8), dup);
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t)
          acc[h][t] =
              _mm256_add_epi32(acc[h][t], _mm256_add_epi32(_mm256_madd_epi16(lo16[h][t], s_lo),
                                                           _mm256_madd_epi16(hi16[h][t], s_hi)));
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 dv = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4KPanels::kD + 16 * h)));
      const __m256 dminv = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4KPanels::kDmin + 16 * h)));
      __m256i mw[4];  // rows 8h..: (m[2c], m[2c + 1]) as int16 pairs
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c)
        mw[c] = _mm256_cvtepu8_epi16(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(blk + Q4KPanels::kMins + c * 32 + 16 * h)));
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const int32_t* su = sums + (t * nb + b) * 4;
        __m256i macc = _mm256_madd_epi16(mw[0], _mm256_set1_epi32(su[0]));
#pragma GCC unroll 3
        for (int c = 1; c < 4; ++c)
          macc = _mm256_add_epi32(macc, _mm256_madd_epi16(mw[c], _mm256_set1_epi32(su[c])));
        const __m256 da = _mm256_set1_ps(x[t * nb + b].d);
        accf[h][t] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h][t]), _mm256_mul_ps(dv, da), accf[h][t]);
        accf[h][t] =
            _mm256_fnmadd_ps(_mm256_cvtepi32_ps(macc), _mm256_mul_ps(dminv, da), accf[h][t]);
      }
    }
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      float* out = y + t * ldy + 8 * h;
      if (valid >= size_t(8 * h + 8)) {
        _mm256_storeu_ps(out, accf[h][t]);
      } else if (valid > size_t(8 * h)) {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, accf[h][t]);
        std::copy_n(tmp, valid - 8 * h, out);
      }
    }
}

// The per-call unit sums of tokens [t_begin, t_end), in the calling thread's scratch.
const int32_t* token_unit_sums(const PreparedActs& x, size_t t_begin, size_t t_end) {
  thread_local std::vector<int32_t> buf;
  const size_t nb = x.blocks_per_token, n = (t_end - t_begin) * nb;
  if (buf.size() < n * 4) buf.resize(n * 4);
  for (size_t i = 0; i < n; ++i) Q4KPanels::side(x.q8k[t_begin * nb + i], buf.data() + i * 4);
  return buf.data();
}

void panel_rows(const WeightMatrix& w, const PreparedActs& x, const int32_t* sums, size_t t_begin,
                size_t t_end, size_t r_begin, size_t r_end, float* y, size_t ldy) {
  PITH_CHECK(r_begin % kPanelRows == 0 && t_end - t_begin <= kPanelMaxTokens);
  const size_t nb = x.blocks_per_token, panel_bytes = nb * Q4KPanels::kBytes;
  const auto* panels = static_cast<const uint8_t*>(w.panels);
  for (size_t r = r_begin; r < r_end; r += kPanelRows) {
    const uint8_t* panel = panels + r / kPanelRows * panel_bytes;
    const size_t valid = std::min(kPanelRows, r_end - r);
    for (size_t t = t_begin; t < t_end; t += 2) {
      const ActQ8K* xt = x.q8k + t * nb;
      const int32_t* st = sums + (t - t_begin) * nb * 4;
      float* yt = y + (t - t_begin) * ldy + (r - r_begin);
      if (t + 1 < t_end)
        panel_tokens<2>(panel, nb, xt, st, yt, ldy, valid);
      else
        panel_tokens<1>(panel, nb, xt, st, yt, ldy, valid);
    }
  }
}

// BF16: P panels x T tokens (x of token t at t * cols, f32), the first `valid_last` rows of the
// last panel stored. Separate accumulators for the even and odd columns keep 8 FMA chains
// going at P x T = 2.
template <int P, int T>
void bf16_panel_tokens(const uint8_t* panels, size_t panel_bytes, size_t nb, const float* x,
                       size_t cols, float* y, size_t ldy, size_t valid_last) {
  const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
  __m256 even[P][2][T], odd[P][2][T];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) even[p][h][t] = odd[p][h][t] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
    for (int g = 0; g < 16; ++g) {
      __m256 we[P][2], wo[P][2];
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
              panels + p * panel_bytes + b * Bf16Panels::kBytes + g * 64 + 32 * h));
          we[p][h] = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
          wo[p][h] = _mm256_castsi256_ps(_mm256_and_si256(wv, high));
        }
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const float* xt = x + t * cols + b * 32 + 2 * g;
        const __m256 xe = _mm256_broadcast_ss(xt), xo = _mm256_broadcast_ss(xt + 1);
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            even[p][h][t] = _mm256_fmadd_ps(we[p][h], xe, even[p][h][t]);
            odd[p][h][t] = _mm256_fmadd_ps(wo[p][h], xo, odd[p][h][t]);
          }
      }
    }
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256 v = _mm256_add_ps(even[p][h][t], odd[p][h][t]);
        float* out = y + t * ldy + p * kPanelRows + 8 * h;
        const size_t valid = p == P - 1 ? valid_last : kPanelRows;
        if (valid >= size_t(8 * h + 8)) {
          _mm256_storeu_ps(out, v);
        } else if (valid > size_t(8 * h)) {
          alignas(32) float tmp[8];
          _mm256_store_ps(tmp, v);
          std::copy_n(tmp, valid - 8 * h, out);
        }
      }
}

void bf16_panel_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                     size_t r_begin, size_t r_end, float* y, size_t ldy) {
  PITH_CHECK(r_begin % kPanelRows == 0 && t_end - t_begin <= kPanelMaxTokens);
  const size_t nb = w.cols / Bf16Panels::kCols, panel_bytes = nb * Bf16Panels::kBytes;
  const auto* panels = static_cast<const uint8_t*>(w.panels);
  const float* x0 = x.f32 + t_begin * w.cols;
  const size_t nt = t_end - t_begin;
  for (size_t r = r_begin; r < r_end; r += 2 * kPanelRows) {
    const uint8_t* panel = panels + r / kPanelRows * panel_bytes;
    const size_t n_panels = std::min<size_t>(2, (r_end - r + kPanelRows - 1) / kPanelRows);
    const size_t valid_last = std::min(kPanelRows, r_end - (r + (n_panels - 1) * kPanelRows));
    float* yr = y + (r - r_begin);
    if (nt == 1) {
      if (n_panels == 2)
        bf16_panel_tokens<2, 1>(panel, panel_bytes, nb, x0, w.cols, yr, ldy, valid_last);
      else
        bf16_panel_tokens<1, 1>(panel, panel_bytes, nb, x0, w.cols, yr, ldy, valid_last);
      continue;
    }
    for (size_t p = 0; p < n_panels; ++p) {  // token pairs, one panel at a time
      const size_t valid = p + 1 == n_panels ? valid_last : kPanelRows;
      for (size_t t = 0; t < nt; t += 2) {
        float* yt = yr + t * ldy + p * kPanelRows;
        const float* xt = x0 + t * w.cols;
        if (t + 1 < nt)
          bf16_panel_tokens<1, 2>(panel + p * panel_bytes, panel_bytes, nb, xt, w.cols, yt, ldy,
                                  valid);
        else
          bf16_panel_tokens<1, 1>(panel + p * panel_bytes, panel_bytes, nb, xt, w.cols, yt, ldy,
                                  valid);
      }
    }
  }
}

// Rows [r_begin, r_end) of whichever panel format w holds.
void format_rows(const WeightMatrix& w, const PreparedActs& x, const int32_t* q4k_sums,
                 size_t t_begin, size_t t_end, size_t r_begin, size_t r_end, float* y, size_t ldy) {
  if (w.dtype == DType::Q4_K)
    panel_rows(w, x, q4k_sums, t_begin, t_end, r_begin, r_end, y, ldy);
  else
    bf16_panel_rows(w, x, t_begin, t_end, r_begin, r_end, y, ldy);
}

}  // namespace

bool uses_avx2_panels(const WeightMatrix& w, size_t n_tokens) {
  return w.panels != nullptr && (w.dtype == DType::Q4_K || w.dtype == DType::BF16) &&
         n_tokens <= kPanelMaxTokens;
}

std::shared_ptr<const void> pack_panels_avx2(ThreadPool& pool, const WeightMatrix& w) {
  if (w.dtype == DType::Q4_K) return panel_gemm::pack_all<Q4KPanels>(pool, w);
  if (w.dtype == DType::BF16 && w.cols % Bf16Panels::kCols == 0)
    return panel_gemm::pack_all<Bf16Panels>(pool, w);
  return nullptr;
}

void gemv_panels_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y) {
  const int32_t* sums = w.dtype == DType::Q4_K ? token_unit_sums(x, 0, n_tokens) : nullptr;
  // Tasks of ~256 KiB (decode_row_block), whole panels: each thread streams long contiguous
  // runs, as the row kernels do.
  const size_t task_rows = std::max(size_t{64}, decode_row_block(w, pool.size(), kPanelRows));
  const size_t n_tasks = (w.rows + task_rows - 1) / task_rows;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r_begin = task * task_rows, r_end = std::min(w.rows, r_begin + task_rows);
    format_rows(w, x, sums, 0, n_tokens, r_begin, r_end, y + r_begin, w.rows);
  });
}

void gemv_panels_avx2_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin,
                           size_t t_end, size_t r_begin, size_t r_end, float* y, size_t ldy) {
  const int32_t* sums = w.dtype == DType::Q4_K ? token_unit_sums(x, t_begin, t_end) : nullptr;
  format_rows(w, x, sums, t_begin, t_end, r_begin, r_end, y, ldy);
}

}  // namespace pith::kernels

#pragma GCC pop_options
