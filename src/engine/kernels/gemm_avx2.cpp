// The compute-bound path of matmul (prefill, large decode batches) for AVX2+FMA on float
// weights (F32, F16, BF16): a packed f32 GEMM. (The quantised dtypes have an integer GEMM:
// gemm_int8_avx2.cpp.) Weights are converted once into a packed f32 panel and reused by every
// token; activations are the prepared ones in f32 (bf16-rounded for BF16).
//
// Blocking (per task = a block of kRowBlock rows, spread over the pool):
//   for each k-block of kKc columns:
//     pack the task's rows into [kRowBlock/16][kKc][16] f32 panels (L2, 64 KiB)
//     for each 16-row panel:                       (16 KiB, L1)
//       for each group of 6 tokens: micro-kernel 6 tokens x 16 rows over kKc, 12
//         accumulators, += into y (first k-block stores)
// Activations are packed once per call, k-major per group of 6 tokens.
// The micro-kernel per k: 2 panel loads + 6 activation broadcasts + 12 FMAs (FMA-bound).
//
// Batched decode (tens of tokens) reuses each packed panel for few tokens, so the 8x8
// transposes of the packing (24 shuffles per 64 weights, on the 2 shuffle pipes) cost ~15 % of
// the multiply-adds at 32 tokens. The token-lane variant (gemm_lanes_*) turns the product
// around: 8 *tokens* per vector, each weight broadcast from a dequantised row-major copy
// (no transpose), results gathered per row in a small [rows][tokens] buffer and transposed once
// at the end. Its micro-kernel per k: 2 activation loads + 6 weight broadcasts + 12 FMAs, i.e.
// the same arithmetic intensity as the panel kernel.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pith::kernels {

namespace {

constexpr size_t kNr = 16;  // rows per micro-panel (two 8-lane vectors)
constexpr int kMr = 6;      // tokens per micro-kernel call
static_assert(kMr == kGemmTokenGroup);
constexpr size_t kKc = 256;         // columns per k-block
constexpr size_t kRowBlock = 64;    // rows per task
constexpr size_t kTokenChunk = 96;  // tokens whose packed k-block stays in L2 (96 KiB)

// Converts columns [k0, k0 + n) of one float weight row into dst (f32).
void dequant_segment(DType dtype, const uint8_t* row, size_t k0, size_t n, float* dst) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, reinterpret_cast<const float*>(row) + k0, n * 4);
      return;
    case DType::F16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
      size_t i = 0;
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_f16(s + i));
      for (; i < n; ++i) dst[i] = _cvtsh_ss(s[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(row) + k0;
      size_t i = 0;
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_bf16(s + i));
      for (; i < n; ++i) {
        uint32_t u = uint32_t{s[i]} << 16;
        std::memcpy(dst + i, &u, 4);
      }
      return;
    }
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4:
      break;  // the quantised dtypes take the integer GEMM (gemm_int8_avx2.cpp)
  }
  PITH_CHECK(false);
}

// Requests columns [k0, k0 + n) of a weight row into L2 ahead of their k-block. A k-block
// reads a short segment (512-1024 bytes) of each of many rows, strided streams the hardware
// prefetcher does not pick up, so without this the dequantisation waits on DRAM for every
// segment; prefetched while the previous k-block is multiplied, they arrive in time.
inline void prefetch_segment(DType dtype, const uint8_t* row, size_t k0, size_t n) {
  const size_t b0 = row_bytes(dtype, k0), b1 = row_bytes(dtype, k0 + n);
  for (size_t b = b0; b < b1; b += 64)
    _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(row + b1 - 1), _MM_HINT_T1);
}

// In-register 8x8 transpose: v[j] becomes column j of the 8 input rows.
inline void transpose8x8(__m256 v[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Packs rows [r0, r0 + nr) x columns [k0, k0 + kc) into panels [nr/16 rounded up][kc][16],
// zero-filling rows past nr. `tmp` holds 8 * kc floats: 8 rows are dequantised, then
// transposed 8x8 at a time into the panel.
void pack_panels(const WeightMatrix& w, size_t r0, size_t nr, size_t k0, size_t kc, float* panels,
                 float* tmp) {
  const size_t n_panels = (nr + kNr - 1) / kNr;
  for (size_t p = 0; p < n_panels; ++p) {
    float* panel = panels + p * kc * kNr;
    for (size_t half = 0; half < 2; ++half) {
      for (size_t i = 0; i < 8; ++i) {
        const size_t r = p * kNr + half * 8 + i;
        if (r < nr) {
          dequant_segment(w.dtype, w.row(r0 + r), k0, kc, tmp + i * kc);
          if (k0 + kc < w.cols)
            prefetch_segment(w.dtype, w.row(r0 + r), k0 + kc, std::min(kKc, w.cols - k0 - kc));
        } else
          std::memset(tmp + i * kc, 0, kc * sizeof(float));
      }
      size_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        __m256 v[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(tmp + i * kc + k);
        transpose8x8(v);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) _mm256_store_ps(panel + (k + j) * kNr + half * 8, v[j]);
      }
      for (; k < kc; ++k)
        for (size_t i = 0; i < 8; ++i) panel[k * kNr + half * 8 + i] = tmp[i * kc + k];
    }
  }
}

// `x` is packed k-major: x[k * kMr + t] (6 contiguous activations per k).
template <int MT>
void micro_kernel(const float* panel, const float* x, size_t kc, float* y, size_t ldy, size_t nr,
                  bool accumulate) {
  __m256 c0[MT], c1[MT];
#pragma GCC unroll 8
  for (int t = 0; t < MT; ++t) c0[t] = c1[t] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (size_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(panel + k * kNr), w1 = _mm256_load_ps(panel + k * kNr + 8);
#pragma GCC unroll 8
    for (int t = 0; t < MT; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + k * kMr + t);
      c0[t] = _mm256_fmadd_ps(w0, xb, c0[t]);
      c1[t] = _mm256_fmadd_ps(w1, xb, c1[t]);
    }
  }
  if (nr == kNr) {
#pragma GCC unroll 8
    for (int t = 0; t < MT; ++t) {
      float* yt = y + t * ldy;
      if (accumulate) {
        c0[t] = _mm256_add_ps(c0[t], _mm256_loadu_ps(yt));
        c1[t] = _mm256_add_ps(c1[t], _mm256_loadu_ps(yt + 8));
      }
      _mm256_storeu_ps(yt, c0[t]);
      _mm256_storeu_ps(yt + 8, c1[t]);
    }
  } else {
    alignas(32) float tmp[kNr];
    // Unrolled so c0/c1 are only ever indexed by constants and stay in registers.
#pragma GCC unroll 8
    for (int t = 0; t < MT; ++t) {
      _mm256_store_ps(tmp, c0[t]);
      _mm256_store_ps(tmp + 8, c1[t]);
      float* yt = y + t * ldy;
      for (size_t i = 0; i < nr; ++i) yt[i] = accumulate ? yt[i] + tmp[i] : tmp[i];
    }
  }
}

template <typename Fn>
void for_mt(int mt, Fn&& fn) {
  switch (mt) {
    case 1:
      return fn.template operator()<1>();
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    case 4:
      return fn.template operator()<4>();
    case 5:
      return fn.template operator()<5>();
    default:
      return fn.template operator()<6>();
  }
}

// Per-thread buffers (a cache: each pool thread reuses its own).
struct GemmScratch {
  std::vector<float, std::allocator<float>> panels;
  std::vector<float> row_tmp;
};

}  // namespace

namespace {

// Activations packed per group of `group` tokens, k-major: xp[g][k][group] (zero-padded last
// group), in the calling thread's scratch. Rows of x are cols*4 bytes apart, often a multiple
// of 4 KiB, so reading several of them in lockstep would conflict in L1; packed, a
// micro-kernel reads one contiguous stream.
const float* pack_token_groups(ThreadPool& pool, const float* x, size_t n_tokens, size_t cols,
                               size_t group) {
  const size_t n_groups = (n_tokens + group - 1) / group;
  thread_local std::vector<float> xp_buf;
  if (xp_buf.size() < n_groups * cols * group) xp_buf.resize(n_groups * cols * group);
  float* xp = xp_buf.data();
  pool.parallel_for(n_groups, [&](size_t g, size_t) {
    float* dst = xp + g * cols * group;
    for (size_t t = 0; t < group; ++t) {
      const size_t tok = g * group + t;
      if (tok < n_tokens) {
        const float* src = x + tok * cols;
        for (size_t k = 0; k < cols; ++k) dst[k * group + t] = src[k];
      } else {
        for (size_t k = 0; k < cols; ++k) dst[k * group + t] = 0.0f;
      }
    }
  });
  return xp;
}

}  // namespace

const float* pack_gemm_acts_avx2(ThreadPool& pool, const float* x, size_t n_tokens, size_t cols) {
  return pack_token_groups(pool, x, n_tokens, cols, kMr);
}

void gemm_avx2_rows(const WeightMatrix& w, const float* xp, size_t t_begin, size_t t_end,
                    size_t r_begin, size_t r_end, float* y, size_t ldy) {
  thread_local GemmScratch s;
  // +8 floats so the panels can start on a 32-byte boundary.
  if (s.panels.size() < kRowBlock * kKc + 8) s.panels.resize(kRowBlock * kKc + 8);
  if (s.row_tmp.size() < 8 * kKc) s.row_tmp.resize(8 * kKc);
  float* panels = s.panels.data();
  panels += (32 - reinterpret_cast<uintptr_t>(panels) % 32) % 32 / sizeof(float);
  const size_t cols = w.cols;

  for (size_t r0 = r_begin; r0 < r_end; r0 += kRowBlock) {
    const size_t nr = std::min(kRowBlock, r_end - r0);
    const size_t n_panels = (nr + kNr - 1) / kNr;
    for (size_t k0 = 0; k0 < cols; k0 += kKc) {
      const size_t kc = std::min(kKc, cols - k0);
      pack_panels(w, r0, nr, k0, kc, panels, s.row_tmp.data());
      for (size_t c0 = t_begin; c0 < t_end; c0 += kTokenChunk) {
        const size_t c1 = std::min(t_end, c0 + kTokenChunk);
        for (size_t p = 0; p < n_panels; ++p) {
          const size_t prow = std::min(kNr, nr - p * kNr);
          for (size_t t0 = c0; t0 < c1; t0 += kMr) {
            const int mt = static_cast<int>(std::min<size_t>(kMr, c1 - t0));
            for_mt(mt, [&]<int MT>() {
              micro_kernel<MT>(panels + p * kc * kNr, xp + (t0 / kMr) * cols * kMr + k0 * kMr, kc,
                               y + (t0 - t_begin) * ldy + (r0 - r_begin) + p * kNr, ldy, prow,
                               k0 > 0);
            });
          }
        }
      }
    }
  }
}

// y[t][r] = sum_k x[t][k] * W[r][k], x f32 [n_tokens][w.cols] (already in the dot type).
void gemm_avx2(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens, float* y) {
  const float* xp = pack_gemm_acts_avx2(pool, x, n_tokens, w.cols);
  const size_t n_tasks = (w.rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r0 = task * kRowBlock;
    gemm_avx2_rows(w, xp, 0, n_tokens, r0, std::min(w.rows, r0 + kRowBlock), y + r0, w.rows);
  });
}

// ---- token-lane variant (batched decode) ----

namespace {

constexpr int kLaneRows = 6;          // weight rows per micro-kernel
constexpr size_t kLaneRowBlock = 48;  // rows dequantised per k-block (a multiple of kLaneRows)
static_assert(kLaneRowBlock % kLaneRows == 0);
constexpr size_t kLane = kGemmLaneGroup;  // tokens per vector

// acc(r, token group g) over kc columns: w holds R dequantised rows (stride ldw), x the packed
// activations of G token groups (stride x_stride between groups, [k][8] within one); results
// go to yt[r * ldt + g * 8 + lane], added to what is there unless this is the first k-block.
template <int R, int G>
void lane_kernel(const float* w, size_t ldw, const float* x, size_t x_stride, size_t kc, float* yt,
                 size_t ldt, bool accumulate) {
  __m256 c[R][G];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) c[r][g] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (size_t k = 0; k < kc; ++k) {
    __m256 xv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) xv[g] = _mm256_loadu_ps(x + g * x_stride + k * kLane);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wb = _mm256_broadcast_ss(w + r * ldw + k);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) c[r][g] = _mm256_fmadd_ps(wb, xv[g], c[r][g]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      float* p = yt + r * ldt + g * kLane;
      if (accumulate) c[r][g] = _mm256_add_ps(c[r][g], _mm256_loadu_ps(p));
      _mm256_storeu_ps(p, c[r][g]);
    }
}

}  // namespace

const float* pack_lane_acts_avx2(ThreadPool& pool, const float* x, size_t n_tokens, size_t cols) {
  return pack_token_groups(pool, x, n_tokens, cols, kLane);
}

void gemm_lanes_avx2_rows(const WeightMatrix& w, const float* xp, size_t t_begin, size_t t_end,
                          size_t r_begin, size_t r_end, float* y, size_t ldy) {
  const size_t cols = w.cols, nt = t_end - t_begin;
  const size_t g_begin = t_begin / kLane, n_groups = (nt + kLane - 1) / kLane;
  const size_t ldt = n_groups * kLane;
  thread_local std::vector<float> wbuf, yt;
  if (wbuf.size() < kLaneRowBlock * kKc) wbuf.resize(kLaneRowBlock * kKc);
  if (yt.size() < kLaneRowBlock * ldt) yt.resize(kLaneRowBlock * ldt);
  for (size_t r0 = r_begin; r0 < r_end; r0 += kLaneRowBlock) {
    const size_t nr = std::min(kLaneRowBlock, r_end - r0);
    for (size_t k0 = 0; k0 < cols; k0 += kKc) {
      const size_t kc = std::min(kKc, cols - k0);
      for (size_t i = 0; i < nr; ++i) {
        dequant_segment(w.dtype, w.row(r0 + i), k0, kc, wbuf.data() + i * kKc);
        // The same rows' next k-block, or after the last one the next row block's first.
        if (k0 + kc < cols)
          prefetch_segment(w.dtype, w.row(r0 + i), k0 + kc, std::min(kKc, cols - k0 - kc));
        else if (r0 + kLaneRowBlock + i < r_end)
          prefetch_segment(w.dtype, w.row(r0 + kLaneRowBlock + i), 0, std::min(kKc, cols));
      }
      for (size_t rr = 0; rr < nr; rr += kLaneRows) {
        const int mr = static_cast<int>(std::min<size_t>(kLaneRows, nr - rr));
        for (size_t g = 0; g < n_groups; g += 2) {
          const int mg = static_cast<int>(std::min<size_t>(2, n_groups - g));
          for_tile<kLaneRows, 2>(mr, mg, [&]<int R, int G>() {
            lane_kernel<R, G>(wbuf.data() + rr * kKc, kKc,
                              xp + (g_begin + g) * cols * kLane + k0 * kLane, cols * kLane, kc,
                              yt.data() + rr * ldt + g * kLane, ldt, k0 > 0);
          });
        }
      }
    }
    // [rows][tokens] -> y[token][row]
    for (size_t t = 0; t < nt; ++t) {
      float* yrow = y + t * ldy + (r0 - r_begin);
      for (size_t i = 0; i < nr; ++i) yrow[i] = yt[i * ldt + t];
    }
  }
}

void gemm_lanes_avx2(ThreadPool& pool, const WeightMatrix& w, const float* x, size_t n_tokens,
                     float* y) {
  const float* xp = pack_lane_acts_avx2(pool, x, n_tokens, w.cols);
  const size_t n_tasks = (w.rows + kLaneRowBlock - 1) / kLaneRowBlock;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r0 = task * kLaneRowBlock;
    gemm_lanes_avx2_rows(w, xp, 0, n_tokens, r0, std::min(w.rows, r0 + kLaneRowBlock), y + r0,
                         w.rows);
  });
}

}  // namespace pith::kernels

#pragma GCC pop_options
