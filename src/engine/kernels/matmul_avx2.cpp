// AVX2 + FMA + F16C matmul kernels for every weight dtype.
//
// One register-tiled micro-kernel per dtype computes an R-rows x T-tokens block of outputs
// over the whole inner dimension: per step it loads T activation vectors and R weight vectors
// and does R*T multiply-adds, so each weight byte loaded is used T times and each activation
// R times. Accumulators are 8-lane f32 vectors, reduced horizontally once at the end.
//
// Loop nest (matmul_tiled): tasks = blocks of rows, spread over the thread pool; inside a task,
// tokens in chunks sized to stay in L2, then R-row groups, then T-token groups.
//   - Decode (n_tokens ≤ TMax): a single token group, so every weight row is streamed from memory
//     exactly once (bandwidth-bound). Row blocks are sized in bytes (see decode_row_block), and
//     quantised rows (and float rows for a single token, up to kStreamMaxActBytes of
//     activations) are walked one at a time with a software prefetch kStreamAheadBytes ahead
//     in the task's contiguous byte range: one long stream per core keeps enough cache-line
//     misses in flight, where R interleaved short streams, or short tasks whose first tile
//     starts cold, left 10-35 % of the read bandwidth unused.
//   - Prefill / batches: the row block's weights stay in L1/L2 while every token chunk passes
//     (compute-bound).
// The 32-block quants (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) use integer dot products on int8
// activations (maddubs: u8 x s8 -> s16 pairs, madd -> s32), one f32 scale multiply per 32-block
// (and, for Q4_1/Q5_1, one offset multiply with the activations' block sum; block32_avx2.h);
// the K-quants the same per 256-block with their own single-row micro-kernel (kquant_avx2.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernels/block32_avx2.h"
#include "engine/kernels/kquant_avx2.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pith::kernels {

namespace {

// Float weights: from this many tokens on, the packed f32 GEMM (gemm_avx2.cpp) beats the
// register tiles (measured on Q8_0 when it still took this GEMM).
constexpr size_t kGemmMinTokens = 24;
// Below this many tokens the GEMM runs in its token-lane variant (gemm_avx2.cpp: no panel
// transposes). `pith bench matmul --dtype q8_0 --tokens 24 32 48 64 96`, interleaved runs:
// 1.0-1.25x the panel GEMM's GFLOP/s at 24-96 tokens (e.g. 32 tokens on a 2048x2048 Q8_0
// matrix 125.6 -> 150.8), a wash at 128; prefill-sized calls keep the panel GEMM, whose token
// chunks stay in L2. Below kGemmMinTokens both lose to the register tiles (4 tokens: 34 vs
// 104 GFLOP/s).
constexpr size_t kGemmLaneMaxTokens = 128;
// The quantised dtypes take the integer GEMM (gemm_int8_avx2.cpp) instead, from this many
// tokens on. `pith bench matmul --isa avx2` on the 8192x2048 matrix, interleaved rounds, GEMM
// vs the register tiles (and from 24 tokens the f32 GEMM it replaced), GFLOP/s:
//   Q4_0/Q5_1: 4 tokens 189-194 vs 118-162, 8 tokens 267-328 vs 122-162, 16 243-346 vs 120-162;
//   Q4_K/Q6_K: 8 tokens 204-273 vs 170-253, 12 260-312 vs 187-225, 128 453-485 vs 205-232;
//   Q8_0 (the sign trick): 12 tokens 173-248 vs 206-219, 16 200-248 vs 212-219, 24 216-273
//   vs 172-180.
size_t int8_gemm_min_tokens(DType dtype) {
  if (dtype == DType::Q8_0) return 16;
  return is_kquant(dtype) ? 12 : 4;
}
bool uses_int8_gemm(const WeightMatrix& w, size_t n_tokens) {
  return has_int8_gemm_avx2(w.dtype) && n_tokens >= int8_gemm_min_tokens(w.dtype);
}

// ---- float weights (F32, F16, BF16): f32 FMA ----

template <DType D>
inline __m256 load_w8(const uint8_t* row, size_t k) {
  if constexpr (D == DType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  if constexpr (D == DType::F16) return avx2::load_f16(reinterpret_cast<const uint16_t*>(row) + k);
  if constexpr (D == DType::BF16)
    return avx2::load_bf16(reinterpret_cast<const uint16_t*>(row) + k);
}

template <DType D>
inline float load_w1(const uint8_t* row, size_t k) {
  if constexpr (D == DType::F32) return reinterpret_cast<const float*>(row)[k];
  if constexpr (D == DType::F16) return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]);
  if constexpr (D == DType::BF16) {
    uint32_t u = uint32_t{reinterpret_cast<const uint16_t*>(row)[k]} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
}

// out[t*ldy + r] = dot(W row r, x row t) for r < R, t < T.
template <DType D, int R, int T>
void tile_float(const uint8_t* w0, size_t w_stride, const float* x0, size_t k_total, float* y0,
                size_t ldy) {
  __m256 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  // Decode-sized tiles stream their rows from memory: prefetch the next tile's rows (the
  // hardware prefetchers lose track of R interleaved short streams).
  constexpr bool kPrefetch = T <= 2;
  constexpr size_t kElem = D == DType::F32 ? 4 : 2;
  size_t k = 0;
  for (; k + 8 <= k_total; k += 8) {
    if constexpr (kPrefetch) {
      if ((k * kElem) % 64 == 0)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w0 + (R + r) * w_stride + k * kElem),
                       _MM_HINT_T0);
    }
    __m256 xv[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x0 + t * k_total + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m256 wv = load_w8<D>(w0 + r * w_stride, k);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      float s = avx2::hsum(acc[r][t]);
      for (size_t kk = k; kk < k_total; ++kk)
        s += load_w1<D>(w0 + r * w_stride, kk) * x0[t * k_total + kk];
      y0[t * ldy + r] = s;
    }
}

// Decode of one token: a row streamed from memory, prefetching kStreamAheadBytes ahead along
// it. Four independent accumulators keep the FMA latency off the critical path (one would cap a
// core at ~8 bytes of bf16 per cycle, below what it streams from DRAM).
template <DType D>
float row_float_stream(const uint8_t* w, const float* x, size_t k_total) {
  constexpr int U = 4;
  constexpr size_t kElem = D == DType::F32 ? 4 : 2;
  constexpr int kLines = 8 * U * kElem / 64;
  __m256 acc[U];
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  size_t k = 0;
  for (; k + 8 * U <= k_total; k += 8 * U) {
#pragma GCC unroll 16
    for (int l = 0; l < kLines; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(w + k * kElem + 64 * l + kStreamAheadBytes),
                   _MM_HINT_T0);
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u)
      acc[u] = _mm256_fmadd_ps(load_w8<D>(w, k + 8 * u), _mm256_loadu_ps(x + k + 8 * u), acc[u]);
  }
  for (; k + 8 <= k_total; k += 8)
    acc[0] = _mm256_fmadd_ps(load_w8<D>(w, k), _mm256_loadu_ps(x + k), acc[0]);
  float s = avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; k < k_total; ++k) s += load_w1<D>(w, k) * x[k];
  return s;
}

// Float rows are streamed one at a time for a single token while its activations fill at most
// half of L1 (16 KB): longer ones (the FFN down projection's 8192 columns) reload activations
// from L2 for every row and decode faster in the 4-row tiles, which use each load four times.
// (Streaming them in column segments whose activations fit L1, a pass over the rows per segment,
// was slower still on Zen 4's AVX2 path: 23-25 ms for the 1B down projections against 17-19 ms
// in the tiles, with segments of 4 or 8 KB of each row; whole rows against the activations as
// bf16, 16 KB, ran at the tiles' 16-17 ms: these rows stream at ~33 GB/s where the 2048-column
// ones reach ~50, cause not found.)
constexpr size_t kStreamMaxActBytes = 16 << 10;

// ---- 32-block quantised weights against int8 activations ----

// kStream: rows are consumed in memory order (R == 1 streaming decode), prefetch ahead along
// them; otherwise decode-sized tiles prefetch the next tile's rows.
template <DType D, int R, int T, bool kStream = false>
void tile_q8(const uint8_t* w0, size_t w_stride, const ActQ8* x0, size_t n_blocks, float* y0,
             size_t ldy) {
  __m256 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  // The "+ m" types' offsets: m * s_a per block, in scalar accumulators.
  constexpr bool kMin = has_block_min(D);
  float acc_min[R][T] = {};
  const __m256i ones = _mm256_set1_epi16(1);
  constexpr size_t kBlockBytes = kBlock32Bytes<D>;
  constexpr size_t kPfTiles = 1;
  // Streaming: one prefetch per ~64 bytes of blocks.
  constexpr size_t kPfEvery = (64 + kBlockBytes - 1) / kBlockBytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    if constexpr (kStream) {
      if (b % kPfEvery == 0)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w0 + r * w_stride + b * kBlockBytes +
                                                     kStreamAheadBytes),
                       _MM_HINT_T0);
    }
    __m256i xq[T];
    float xd[T], xsum[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const ActQ8& a = x0[t * n_blocks + b];
      xq[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      xd[t] = a.d;
      xsum[t] = a.s;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      if constexpr (!kStream &&
                    T <= 2)  // decode-sized: prefetch the next tile's rows (see tile_float)
        _mm_prefetch(
            reinterpret_cast<const char*>(w0 + (kPfTiles * R + r) * w_stride + b * kBlockBytes),
            _MM_HINT_T0);
      float wd, wm;
      const __m256i wq = load_block32<D>(w0 + r * w_stride, b, &wd, &wm);
      // maddubs wants unsigned weights: signed ones lend their sign to the activations.
      const __m256i wu = kMin ? wq : _mm256_sign_epi8(wq, wq);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m256i xs = kMin ? xq[t] : _mm256_sign_epi8(xq[t], wq);
        __m256i p16 = _mm256_maddubs_epi16(wu, xs);
        __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_set1_ps(wd * xd[t]), acc[r][t]);
        if constexpr (kMin) acc_min[r][t] += wm * xsum[t];
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y0[t * ldy + r] = avx2::hsum(acc[r][t]) + acc_min[r][t];
}

// ---- the loop nest ----

// Rows [r_begin, r_end) x tokens [t_begin, t_end) on the calling thread, into
// y[(t - t_begin) * ldy + (r - r_begin)]. r_begin is a multiple of RMax for the same tiling as
// matmul.
template <DType D, int RMax, int TMax>
void tiled_rows_block32(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                        size_t r_begin, size_t r_end, float* y, size_t ldy) {
  constexpr bool kQuant = is_block32_quant(D);
  const size_t cols = w.cols, wstride = w.row_bytes();
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  // Bytes of one token's activations, to size token chunks to ~128 KiB (half of L2).
  const size_t x_row_bytes = kQuant ? x.blocks_per_token * sizeof(ActQ8) : cols * sizeof(float);
  if constexpr (kQuant) {
    // Decode: stream the rows one at a time.
    if (t_end - t_begin <= size_t(TMax)) {
      const int nt = static_cast<int>(t_end - t_begin);
      for (size_t r = r_begin; r < r_end; ++r)
        for_tile<1, TMax>(1, nt, [&]<int R, int T>() {
          tile_q8<D, 1, T, true>(wdata + r * wstride, wstride, x.q8 + t_begin * x.blocks_per_token,
                                 x.blocks_per_token, y + (r - r_begin), ldy);
        });
      return;
    }
  } else {
    // One token, short rows: stream them too (the 1B BF16 model on Zen 4, AVX2 path: 10.0 ->
    // 13.5 tok/s; 2-3 tokens, or 2- and 4-row streams, lost to the tiles in A/B runs).
    if (t_end - t_begin == 1 && cols * sizeof(float) <= kStreamMaxActBytes) {
      const float* x0 = x.f32 + t_begin * cols;
      for (size_t r = r_begin; r < r_end; ++r)
        y[r - r_begin] = row_float_stream<D>(wdata + r * wstride, x0, cols);
      return;
    }
  }
  const size_t chunk = std::max<size_t>(TMax, (size_t{128} << 10) / x_row_bytes / TMax * TMax);
  for (size_t t0 = t_begin; t0 < t_end; t0 += chunk) {
    const size_t t_stop = std::min(t_end, t0 + chunk);
    for (size_t r = r_begin; r < r_end; r += RMax) {
      const int nr = static_cast<int>(std::min<size_t>(RMax, r_end - r));
      for (size_t t = t0; t < t_stop; t += TMax) {
        const int nt = static_cast<int>(std::min<size_t>(TMax, t_stop - t));
        const uint8_t* w0 = wdata + r * wstride;
        float* y0 = y + (t - t_begin) * ldy + (r - r_begin);
        for_tile<RMax, TMax>(nr, nt, [&]<int R, int T>() {
          if constexpr (kQuant)
            tile_q8<D, R, T>(w0, wstride, x.q8 + t * x.blocks_per_token, x.blocks_per_token, y0,
                             ldy);
          else
            tile_float<D, R, T>(w0, wstride, x.f32 + t * cols, cols, y0, ldy);
        });
      }
    }
  }
}

template <DType D, int RMax, int TMax>
void tiled_rows(const WeightMatrix& w, const PreparedActs& x, size_t t_begin, size_t t_end,
                size_t r_begin, size_t r_end, float* y, size_t ldy) {
  if constexpr (is_kquant(D))
    kquant_rows<D>(w, x, t_begin, t_end, r_begin, r_end, y, ldy);
  else
    tiled_rows_block32<D, RMax, TMax>(w, x, t_begin, t_end, r_begin, r_end, y, ldy);
}

template <DType D, int RMax, int TMax>
void matmul_tiled(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                  float* y) {
  // Row blocks: for decode, sized in bytes (decode_row_block); for prefill 64 rows, so a
  // block's weights are reused across a whole token chunk.
  const size_t row_block = n_tokens <= size_t(TMax) ? decode_row_block(w, pool.size(), RMax) : 64;
  const size_t n_tasks = (w.rows + row_block - 1) / row_block;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r_begin = task * row_block;
    tiled_rows<D, RMax, TMax>(w, x, 0, n_tokens, r_begin, std::min(w.rows, r_begin + row_block),
                              y + r_begin, w.rows);
  });
}

}  // namespace

void quantize_act_q8k_avx2(const float* x, ActQ8K* out, size_t n) {
  quantize_act_q8k_avx2_impl(x, out, n);
}

void quantize_act_q8_avx2(const float* x, ActQ8* out, size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    const float m = avx2::hmax(amax);
    const float d = m / 127.0f;
    out[b].d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256 id = _mm256_set1_ps(m != 0.0f ? 127.0f / m : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // Pack 32 int32 -> 32 int8 in order (packs work per 128-bit lane; permute restores order).
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p);
    const __m256i sum =
        _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    out[b].s = _cvtsh_ss(
        _cvtss_sh(d * static_cast<float>(avx2::hsum_epi32(sum)), _MM_FROUND_TO_NEAREST_INT));
  }
}

namespace {

template <typename Fn>
void for_dtype_tiles(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      return fn.template operator()<DType::F32, 4, 3>();
    case DType::F16:
      return fn.template operator()<DType::F16, 4, 3>();
    case DType::BF16:
      return fn.template operator()<DType::BF16, 4, 3>();
    case DType::Q8_0:
      return fn.template operator()<DType::Q8_0, 4, 2>();
    case DType::Q4_0:
      return fn.template operator()<DType::Q4_0, 4, 2>();
    case DType::Q4_1:
      return fn.template operator()<DType::Q4_1, 4, 2>();
    case DType::Q5_0:
      return fn.template operator()<DType::Q5_0, 4, 2>();
    case DType::Q5_1:
      return fn.template operator()<DType::Q5_1, 4, 2>();
    case DType::IQ4_NL:
      return fn.template operator()<DType::IQ4_NL, 4, 2>();
    case DType::IQ4_XS:
      return fn.template operator()<DType::IQ4_XS, 4, 2>();
    case DType::MXFP4:
      return fn.template operator()<DType::MXFP4, 4, 2>();
    case DType::Q2_K:
      return fn.template operator()<DType::Q2_K, 1, kKquantTokens>();
    case DType::Q3_K:
      return fn.template operator()<DType::Q3_K, 1, kKquantTokens>();
    case DType::Q4_K:
      return fn.template operator()<DType::Q4_K, 1, kKquantTokens>();
    case DType::Q5_K:
      return fn.template operator()<DType::Q5_K, 1, kKquantTokens>();
    case DType::Q6_K:
      return fn.template operator()<DType::Q6_K, 1, kKquantTokens>();
  }
}

}  // namespace

void matmul_avx2(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x, size_t n_tokens,
                 float* y) {
  if (uses_avx2_panels(w, n_tokens)) return gemv_panels_avx2(pool, w, x, n_tokens, y);
  if (uses_int8_gemm(w, n_tokens)) return gemm_int8_avx2(pool, w, x, n_tokens, y);
  if (n_tokens >= kGemmMinTokens) {
    // Float weights (the quantised ones took the integer GEMM above).
    if (n_tokens < kGemmLaneMaxTokens) return gemm_lanes_avx2(pool, w, x.f32, n_tokens, y);
    return gemm_avx2(pool, w, x.f32, n_tokens, y);
  }
  for_dtype_tiles(w.dtype,
                  [&]<DType D, int R, int T>() { matmul_tiled<D, R, T>(pool, w, x, n_tokens, y); });
}

Avx2BlockActs prepare_avx2_blocks(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                                  size_t n_tokens) {
  Avx2BlockActs a;
  a.acts = &x;
  a.n_tokens = n_tokens;
  a.int8_gemm = uses_int8_gemm(w, n_tokens);
  if (!a.int8_gemm && n_tokens >= kGemmMinTokens) {
    a.token_lanes = n_tokens < kGemmLaneMaxTokens;
    a.gemm_packed = a.token_lanes ? pack_lane_acts_avx2(pool, x.f32, n_tokens, w.cols)
                                  : pack_gemm_acts_avx2(pool, x.f32, n_tokens, w.cols);
  }
  return a;
}

void matmul_avx2_rows(const WeightMatrix& w, const Avx2BlockActs& a, size_t t_begin, size_t t_end,
                      size_t r_begin, size_t r_end, float* y, size_t ldy) {
  if (uses_avx2_panels(w, a.n_tokens))
    return gemv_panels_avx2_rows(w, *a.acts, t_begin, t_end, r_begin, r_end, y, ldy);
  if (a.int8_gemm) return gemm_int8_avx2_rows(w, *a.acts, t_begin, t_end, r_begin, r_end, y, ldy);
  if (a.gemm_packed != nullptr && a.token_lanes)
    return gemm_lanes_avx2_rows(w, a.gemm_packed, t_begin, t_end, r_begin, r_end, y, ldy);
  if (a.gemm_packed != nullptr)
    return gemm_avx2_rows(w, a.gemm_packed, t_begin, t_end, r_begin, r_end, y, ldy);
  for_dtype_tiles(w.dtype, [&]<DType D, int R, int T>() {
    tiled_rows<D, R, T>(w, *a.acts, t_begin, t_end, r_begin, r_end, y, ldy);
  });
}

}  // namespace pith::kernels

#pragma GCC pop_options
