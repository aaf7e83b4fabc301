// The project's own paged-attention kernel body: F32 and BF16, any mask (causal or the plan's
// bits), GQA/MQA, any head_dim up to 512 (gemma4's global layers), prefill and decode rows in one
// launch, with the families' score options (query scale, tanh soft-cap, sliding window;
// engine/attention.h's AttentionParams). It is the F32 path and the fallback when FlashInfer is not
// built (or cannot take a batch or the options).
//
// Grid: x = query row task (AttentionPlan's row_* arrays), y = group of `heads_per_block` query
// heads that share one KV head, z = KV split; block = kThreads threads. The block walks the row's
// visible KV slots in chunks of kThreads with an online softmax (running max m, sum l, accumulator
// acc):
//   scores:     thread t computes q·k of slot (chunk + t) for every head of the group
//   probs:      every thread finds the chunk max (same arithmetic in every thread, so m and l
//               stay identical), rescales, thread t writes p of its slot
//   accumulate: thread t owns dims t, t + kThreads, ... of every head: acc = acc*alpha + Σ p v
// separated by block barriers. Cost per (row, group): one pass over the visible K and V rows.
//
// Split-K (flash-decoding): a decode batch has few (row, group) blocks (batch 1 of Llama-3 8B:
// 8 blocks for 132 SMs), each walking the whole context alone. With n_splits > 1 the z blocks of
// a (row, group) each take an equal share of its chunks and write their unnormalised
// accumulator with its running max and sum to scratch; `merge_splits` (a second launch, one
// block per (row, head)) rescales the shares to their common max and divides by the summed l.
// choose_kv_splits picks the count from the grid size, the SM count and the longest visible
// range, so prefills and big batches keep one split and no scratch.
//
// The body is plain __host__ __device__ code over (block, thread) indices and a SharedTile, run
// by `attention_block` through a `for_threads(phase)` callback: on the device it runs the phase
// for threadIdx.x and synchronises the block; a host unit test runs the phase for every thread
// in turn, which checks the arithmetic and indexing on the CPU (not races: see docs/gpu.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/cuda/kernels/block.h"  // PITH_HD, PITH_UNROLL, tanh_f32

namespace pith::cuda::attn {

constexpr uint32_t kThreads = 128;  // threads per block = KV slots per chunk
constexpr uint32_t kMaxHeadsPerBlock = 8;
// A chunk's max and sum per head are reduced in kParts partials of kThreads / kParts slots, one
// thread each (kMaxHeadsPerBlock * kParts <= kThreads), which every thread then combines.
constexpr uint32_t kParts = 16;
constexpr uint32_t kSlotsPerPart = kThreads / kParts;
static_assert(kMaxHeadsPerBlock * kParts <= kThreads);
constexpr uint32_t kMaxHeadDim = 512;
// Output dims each thread accumulates: the kernel is instantiated for 2 (head_dim <= 256) and
// 4 (up to 512), so the common head sizes keep half the registers.
inline uint32_t dims_per_thread(uint32_t head_dim) {
  return head_dim <= 2 * kThreads ? 2 : 4;
}

// BF16 as raw bits so host code needs no CUDA headers; rounding as __float2bfloat16_rn.
struct Bf16 {
  uint16_t bits;
};

PITH_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
PITH_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
PITH_HD float to_float(float x) {
  return x;
}
PITH_HD float to_float(Bf16 x) {
  return bits_to_float(uint32_t{x.bits} << 16);
}
template <class T>
PITH_HD T from_float(float x);
template <>
PITH_HD float from_float<float>(float x) {
  return x;
}
template <>
PITH_HD Bf16 from_float<Bf16>(float x) {
  const uint32_t u = float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  return Bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};                 // nearest even
}

PITH_HD float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return std::exp(x);
#endif
}

struct KernelParams {
  const void* q;         // [n_tokens][n_heads][head_dim]
  void* out;             // [n_tokens][n_heads][head_dim]
  const void* pool;      // KvPoolLayout
  uint64_t page_stride;  // elements between pages (KvPoolLayout::page_elems)
  uint64_t k_offset;     // block_offset(0, layer, 0)
  uint64_t v_offset;     // block_offset(0, layer, 1)
  uint32_t n_heads, n_kv_heads, head_dim, heads_per_block, page_size;
  float scale;
  float softcap;    // scores -> softcap * tanh(scores / softcap); 0: off
  uint32_t window;  // a row sees only the `window` most recent slots (itself included); 0: all
  // AttentionPlan arrays on the device.
  const int32_t* row_seq;
  const int32_t* row_q;
  const int32_t* row_pos;
  const int32_t* qo_indptr;
  const int32_t* kv_page_indptr;
  const int32_t* kv_page_indices;
  const int32_t* kv_len;
  const int32_t* mask_indptr;
  const uint8_t* mask_bits;
  // Split-K: 1 writes `out` directly; more writes each split's share to the scratch below
  // (indexed by row task, not output row) for merge_splits.
  uint32_t n_splits;
  float* split_acc;  // [n_rows][n_heads][n_splits][head_dim]
  float* split_ml;   // [n_rows][n_heads][n_splits][2]: running max m, sum l
  // K rows start on 16-byte boundaries and head_dim is a multiple of 8 (rows_vectorizable):
  // the scores phase reads 8 elements per load instead of one.
  bool vec8;
  // Every thread rescans the chunk's scores for its max and sum instead of combining partials
  // (2 x 128 x heads shared reads a thread per chunk): the former form, kept to be timed
  // against the partials on a GPU (PagedAttentionGpuTimes) until one is measured faster.
  bool rescan_chunk = false;
};

// Whether every K row of a launch starts 16-byte aligned with a multiple of 8 elements.
inline bool rows_vectorizable(const void* pool, uint64_t page_stride, uint64_t k_offset,
                              uint32_t head_dim) {
  return reinterpret_cast<uintptr_t>(pool) % 16 == 0 && head_dim % 8 == 0 && page_stride % 8 == 0 &&
         k_offset % 8 == 0;
}

constexpr uint32_t kMaxSplits = 32;
constexpr uint32_t kMinChunksPerSplit = 2;  // a share below 256 slots costs more merge than walk

// KV splits for a launch of n_rows x groups blocks whose longest visible range is max_visible
// slots, on a GPU of n_sms multiprocessors: enough to give every SM two blocks, no split
// shorter than kMinChunksPerSplit chunks, at most kMaxSplits. 1 when the grid is already full.
inline uint32_t choose_kv_splits(uint32_t n_rows, uint32_t groups, uint32_t max_visible,
                                 uint32_t n_sms) {
  const uint64_t blocks = uint64_t{n_rows} * groups;
  const uint64_t target = uint64_t{2} * n_sms;
  if (blocks == 0 || blocks >= target) return 1;
  const uint64_t want = (target + blocks - 1) / blocks;
  const uint64_t chunks = (uint64_t{max_visible} + kThreads - 1) / kThreads;
  const uint64_t by_length = chunks / kMinChunksPerSplit;
  const uint64_t n = std::min<uint64_t>({want, by_length, kMaxSplits});
  return n < 2 ? 1 : static_cast<uint32_t>(n);
}

// Scratch floats a launch with n_splits > 1 needs (split_acc then split_ml).
inline size_t split_scratch_floats(uint32_t n_rows, uint32_t n_heads, uint32_t head_dim,
                                   uint32_t n_splits) {
  return size_t{n_rows} * n_heads * n_splits * (head_dim + 2);
}

// Shared memory of one block, sized for head_dim <= D * kThreads (the 4-dims instantiation's
// 512 would cost the common head sizes a third more shared memory, hence occupancy).
template <uint32_t D>
struct SharedTile {
  float q[kMaxHeadsPerBlock * D * kThreads];  // the group's queries, pre-scaled
  float s[kMaxHeadsPerBlock][kThreads];       // chunk scores (-inf where hidden)
  float p[kMaxHeadsPerBlock][kThreads];       // chunk probabilities (relative to running max)
  float part[kMaxHeadsPerBlock][kParts];      // the chunk's partial maxima, then partial sums
  uint64_t v_row[kThreads];                   // element offset of each chunk slot's V row
  uint32_t n_valid;                           // slots of the chunk inside the visible range
};

template <uint32_t D>
struct ThreadState {
  float m[kMaxHeadsPerBlock], l[kMaxHeadsPerBlock], alpha[kMaxHeadsPerBlock];
  float acc[kMaxHeadsPerBlock][D];
};

// The per-block constants every thread derives from the block index.
struct BlockTask {
  uint32_t row, first_head, kv_head, seq, pos, kv_len, n_q, begin, end;
  const int32_t* pages;
  const uint8_t* mask;             // the sequence's bits, or null for causal
  uint32_t first_chunk, n_chunks;  // this split's chunks: [first_chunk, n_chunks)
  uint32_t task, split;            // bx, bz
};

PITH_HD BlockTask block_task(const KernelParams& p, uint32_t bx, uint32_t by, uint32_t bz = 0) {
  BlockTask t;
  t.task = bx;
  t.split = bz;
  t.row = static_cast<uint32_t>(p.row_q[bx]);
  t.seq = static_cast<uint32_t>(p.row_seq[bx]);
  t.pos = static_cast<uint32_t>(p.row_pos[bx]);
  t.first_head = by * p.heads_per_block;
  t.kv_head = t.first_head / (p.n_heads / p.n_kv_heads);
  t.kv_len = static_cast<uint32_t>(p.kv_len[t.seq]);
  t.n_q = static_cast<uint32_t>(p.qo_indptr[t.seq + 1] - p.qo_indptr[t.seq]);
  t.pages = p.kv_page_indices + p.kv_page_indptr[t.seq];
  const int32_t mask_at = p.mask_indptr[t.seq];
  t.mask = mask_at < 0 ? nullptr : p.mask_bits + mask_at;
  // Causal rows see slots [0, kv_len - n_q + pos]; masked rows may see any slot. A window
  // clips both to the `window` slots ending at the row's own slot (as for_visible on the CPU).
  const uint32_t own = t.kv_len - t.n_q + t.pos;
  t.end = t.mask ? t.kv_len : own + 1;
  t.begin = p.window > 0 && own + 1 > p.window ? own + 1 - p.window : 0;
  t.first_chunk = t.begin / kThreads;
  t.n_chunks = (t.end + kThreads - 1) / kThreads;
  if (p.n_splits > 1) {  // an equal share of the row's chunks; trailing splits may get none
    const uint32_t total = t.n_chunks > t.first_chunk ? t.n_chunks - t.first_chunk : 0;
    const uint32_t share = (total + p.n_splits - 1) / p.n_splits;
    const uint32_t first = t.first_chunk + bz * share;
    t.first_chunk = first < t.n_chunks ? first : t.n_chunks;
    t.n_chunks = t.first_chunk + share < t.n_chunks ? t.first_chunk + share : t.n_chunks;
  }
  return t;
}

// 8 consecutive elements at p widened to f32: on the device one 16-byte load (BF16) or two
// (F32) instead of eight 2- or 4-byte ones, whose lanes in a warp each hit another row.
template <class T>
PITH_HD void load8(const T* p, float out[8]) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 2) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    PITH_UNROLL for (int i = 0; i < 4; ++i) {
      out[2 * i] = bits_to_float(w[i] << 16);
      out[2 * i + 1] = bits_to_float(w[i] & 0xffff0000u);
    }
  } else {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  }
#else
  PITH_VECTOR_ACCESS(p, 16);
  for (int i = 0; i < 8; ++i) out[i] = to_float(p[i]);
#endif
}

template <class T, uint32_t D>
PITH_HD void phase_load_q(const KernelParams& p, const BlockTask& b, SharedTile<D>& sh,
                          uint32_t tid, ThreadState<D>& st) {
  const T* q =
      static_cast<const T*>(p.q) + (uint64_t{b.row} * p.n_heads + b.first_head) * p.head_dim;
  for (uint32_t i = tid; i < p.heads_per_block * p.head_dim; i += kThreads)
    sh.q[i] = to_float(q[i]) * p.scale;
  PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock; ++h) {
    st.m[h] = -INFINITY;
    st.l[h] = 0.f;
    st.alpha[h] = 1.f;
    PITH_UNROLL for (uint32_t k = 0; k < D; ++k) st.acc[h][k] = 0.f;
  }
}

template <class T, uint32_t D>
PITH_HD void phase_scores(const KernelParams& p, const BlockTask& b, SharedTile<D>& sh,
                          uint32_t chunk, uint32_t tid) {
  const uint32_t j = chunk * kThreads + tid;
  const uint32_t H = p.heads_per_block;
  if (tid == 0) {
    const uint32_t left = b.end - chunk * kThreads;
    sh.n_valid = left < kThreads ? left : kThreads;
  }
  bool visible = j < b.end && j >= b.begin;
  if (visible && b.mask) {
    const uint64_t bit = uint64_t{b.pos} * b.kv_len + j;
    visible = (b.mask[bit / 8] >> (bit % 8)) & 1;
  }
  if (!visible) {
    PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) sh.s[h][tid] = -INFINITY;
    sh.v_row[tid] = 0;
    return;
  }
  const uint64_t row = uint64_t(b.pages[j / p.page_size]) * p.page_stride +
                       (uint64_t{j % p.page_size} * p.n_kv_heads + b.kv_head) * p.head_dim;
  sh.v_row[tid] = p.v_offset + row;
  const T* k = static_cast<const T*>(p.pool) + p.k_offset + row;
  float dot[kMaxHeadsPerBlock];
  PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) dot[h] = 0.f;
  if (p.vec8) {  // the same products in the same order, 8 elements per load
    for (uint32_t d = 0; d < p.head_dim; d += 8) {
      float kd[8];
      load8(k + d, kd);
      PITH_UNROLL for (uint32_t i = 0; i < 8; ++i) {
        PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) dot[h] +=
            sh.q[h * p.head_dim + d + i] * kd[i];
      }
    }
  } else {
    for (uint32_t d = 0; d < p.head_dim; ++d) {
      const float kd = to_float(k[d]);
      PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) dot[h] +=
          sh.q[h * p.head_dim + d] * kd;
    }
  }
  if (p.softcap > 0) {
    PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) dot[h] =
        p.softcap * kern::tanh_f32(dot[h] * (1.0f / p.softcap));
  }
  PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) sh.s[h][tid] = dot[h];
}

// Thread h * kParts + g reduces slots [g * kSlotsPerPart, +kSlotsPerPart) of head h's scores
// (max) or probabilities (sum; zero past n_valid) into part[h][g].
template <uint32_t D>
PITH_HD void phase_partials(const KernelParams& p, SharedTile<D>& sh, uint32_t tid, bool sum) {
  const uint32_t h = tid / kParts, g = tid % kParts, n = sh.n_valid;
  if (h >= p.heads_per_block) return;
  float r = sum ? 0.f : -INFINITY;
  for (uint32_t t = g * kSlotsPerPart; t < (g + 1) * kSlotsPerPart; ++t) {
    if (sum) {
      r += sh.p[h][t];
    } else if (t < n) {
      r = sh.s[h][t] > r ? sh.s[h][t] : r;
    }
  }
  sh.part[h][g] = r;
}

template <uint32_t D>
PITH_HD void phase_probs(const KernelParams& p, SharedTile<D>& sh, uint32_t tid,
                         ThreadState<D>& st) {
  const uint32_t n = sh.n_valid;
  PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < p.heads_per_block; ++h) {
    float cmax = -INFINITY;
    if (p.rescan_chunk) {
      for (uint32_t t = 0; t < n; ++t) cmax = sh.s[h][t] > cmax ? sh.s[h][t] : cmax;
    } else {
      PITH_UNROLL for (uint32_t g = 0; g < kParts; ++g) cmax =
          sh.part[h][g] > cmax ? sh.part[h][g] : cmax;
    }
    const float m_new = cmax > st.m[h] ? cmax : st.m[h];
    // Nothing visible yet: keep everything at zero (no inf - inf).
    st.alpha[h] = m_new == -INFINITY ? 1.f : fast_exp(st.m[h] - m_new);
    st.m[h] = m_new;
    const float s = sh.s[h][tid];
    sh.p[h][tid] = (tid >= n || s == -INFINITY) ? 0.f : fast_exp(s - m_new);
  }
}

template <class T, uint32_t D>
PITH_HD void phase_accumulate(const KernelParams& p, SharedTile<D>& sh, uint32_t tid,
                              ThreadState<D>& st) {
  const uint32_t n = sh.n_valid;
  const uint32_t H = p.heads_per_block;
  const T* pool = static_cast<const T*>(p.pool);
  PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) {
    float sum = 0.f;
    if (p.rescan_chunk) {
      for (uint32_t t = 0; t < n; ++t) sum += sh.p[h][t];
    } else {
      PITH_UNROLL for (uint32_t g = 0; g < kParts; ++g) sum += sh.part[h][g];
    }
    st.l[h] = st.l[h] * st.alpha[h] + sum;
    PITH_UNROLL for (uint32_t k = 0; k < D; ++k) st.acc[h][k] *= st.alpha[h];
  }
  PITH_UNROLL for (uint32_t k = 0; k < D; ++k) {
    const uint32_t d = tid + k * kThreads;
    if (d >= p.head_dim) break;
    for (uint32_t t = 0; t < n; ++t) {
      if (sh.s[0][t] == -INFINITY) continue;  // hidden slot (masks hide all heads alike)
      const float v = to_float(pool[sh.v_row[t] + d]);
      PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < H; ++h) st.acc[h][k] +=
          sh.p[h][t] * v;
    }
  }
}

template <class T, uint32_t D>
PITH_HD void phase_store(const KernelParams& p, const BlockTask& b, uint32_t tid,
                         const ThreadState<D>& st) {
  if (p.n_splits > 1) {  // the share, unnormalised, with its m and l (same in every thread)
    PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < p.heads_per_block; ++h) {
      const uint64_t at = (uint64_t{b.task} * p.n_heads + b.first_head + h) * p.n_splits + b.split;
      PITH_UNROLL for (uint32_t k = 0; k < D; ++k) {
        const uint32_t d = tid + k * kThreads;
        if (d >= p.head_dim) break;
        p.split_acc[at * p.head_dim + d] = st.acc[h][k];
      }
      if (tid == 0) {
        p.split_ml[2 * at] = st.m[h];
        p.split_ml[2 * at + 1] = st.l[h];
      }
    }
    return;
  }
  T* out = static_cast<T*>(p.out) + (uint64_t{b.row} * p.n_heads + b.first_head) * p.head_dim;
  PITH_UNROLL for (uint32_t k = 0; k < D; ++k) {
    const uint32_t d = tid + k * kThreads;
    if (d >= p.head_dim) break;
    PITH_UNROLL for (uint32_t h = 0; h < kMaxHeadsPerBlock && h < p.heads_per_block; ++h) {
      // A row that sees no slot (an invalid mask) gets zeros rather than NaN.
      const float o = st.l[h] > 0.f ? st.acc[h][k] / st.l[h] : 0.f;
      out[h * p.head_dim + d] = from_float<T>(o);
    }
  }
}

// One block (bx, by). `for_threads(f)` must call f(tid) for every tid < kThreads and then make
// the block's shared-memory writes visible to all threads; `state(tid)` is that thread's
// ThreadState<D> (D = dims_per_thread(head_dim)).
template <class T, uint32_t D, class ForThreads, class StateOf>
PITH_HD void attention_block(const KernelParams& p, uint32_t bx, uint32_t by, uint32_t bz,
                             SharedTile<D>& sh, ForThreads&& for_threads, StateOf&& state) {
  const BlockTask b = block_task(p, bx, by, bz);
  for_threads([&](uint32_t tid) { phase_load_q<T, D>(p, b, sh, tid, state(tid)); });
  for (uint32_t c = b.first_chunk; c < b.n_chunks; ++c) {
    for_threads([&](uint32_t tid) { phase_scores<T, D>(p, b, sh, c, tid); });
    if (!p.rescan_chunk) for_threads([&](uint32_t tid) { phase_partials<D>(p, sh, tid, false); });
    for_threads([&](uint32_t tid) { phase_probs<D>(p, sh, tid, state(tid)); });
    if (!p.rescan_chunk) for_threads([&](uint32_t tid) { phase_partials<D>(p, sh, tid, true); });
    for_threads([&](uint32_t tid) { phase_accumulate<T, D>(p, sh, tid, state(tid)); });
  }
  for_threads([&](uint32_t tid) { phase_store<T, D>(p, b, tid, state(tid)); });
}

// The merge launch (n_splits > 1): block (bx, head), thread tid owns dims tid, tid + kThreads,
// ...: out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M the largest m_s. Shares that
// saw no slot (m = -inf) weigh nothing; a row that saw none at all gets zeros, as unsplit.
template <class T>
PITH_HD void merge_splits(const KernelParams& p, uint32_t bx, uint32_t head, uint32_t tid) {
  const uint64_t base = (uint64_t{bx} * p.n_heads + head) * p.n_splits;
  const float* ml = p.split_ml + 2 * base;
  float m_max = -INFINITY;
  for (uint32_t s = 0; s < p.n_splits; ++s) m_max = ml[2 * s] > m_max ? ml[2 * s] : m_max;
  float l_sum = 0.f;
  for (uint32_t s = 0; s < p.n_splits; ++s)
    if (ml[2 * s] != -INFINITY) l_sum += ml[2 * s + 1] * fast_exp(ml[2 * s] - m_max);
  const uint32_t row = static_cast<uint32_t>(p.row_q[bx]);
  T* out = static_cast<T*>(p.out) + (uint64_t{row} * p.n_heads + head) * p.head_dim;
  for (uint32_t d = tid; d < p.head_dim; d += kThreads) {
    float o = 0.f;
    for (uint32_t s = 0; s < p.n_splits; ++s)
      if (ml[2 * s] != -INFINITY)
        o += p.split_acc[(base + s) * p.head_dim + d] * fast_exp(ml[2 * s] - m_max);
    out[d] = from_float<T>(l_sum > 0.f ? o / l_sum : 0.f);
  }
}

// Query heads per block: the largest divisor of the GQA group size that fits kMaxHeadsPerBlock.
inline uint32_t heads_per_block(uint32_t n_heads, uint32_t n_kv_heads) {
  const uint32_t group = n_heads / n_kv_heads;
  uint32_t best = 1;
  for (uint32_t g = 1; g <= kMaxHeadsPerBlock && g <= group; ++g)
    if (group % g == 0) best = g;
  return best;
}

}  // namespace pith::cuda::attn
