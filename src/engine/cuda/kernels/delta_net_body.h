// Bodies of the Gated DeltaNet kernels (qwen3.5's linear-attention layers; the CPU's
// engine/gated_delta_net.h and engine/delta_rule.h): the causal convolution with its carried
// window, the L2 norms of the query and key heads, the write strengths and decays, and the
// recurrent delta rule over each sequence's state matrices. Plus the query gate of the hybrid
// models' attention layers (a per-head half of the query projection, applied as a sigmoid to
// the attention output).
//
// A sequence's state lives in the device state pool exactly as on the CPU (StatePool): slot s
// of slot_floats floats, recurrent layer r's block at r * layer_floats: the conv window
// [kernel-1][C], then the state matrices [v_heads][v_dim][k_dim]. The kernels advance the
// state over the sequence's inputs of this forward, in order.
#pragma once

#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/norm_body.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kMaxConvHistory = 7;  // conv kernel width up to 8 (qwen3.5: 4)

// The sequences of a forward's recurrent layers (device arrays of n_seqs entries).
struct DeltaSequences {
  const uint32_t* first = nullptr;  // first input row of the sequence in the batch
  const uint32_t* count = nullptr;  // its inputs
  const uint32_t* slot = nullptr;   // its state slot
  uint32_t n_seqs = 0;
  float* states = nullptr;  // the pool
  size_t slot_floats = 0;   // floats per slot
  size_t layer_offset = 0;  // this recurrent layer's block within a slot

  PITH_HD float* state(uint32_t s) const { return states + slot[s] * slot_floats + layer_offset; }
};

PITH_HD float silu_f32(float x) {
  return x / (1.0f + exp_f32(-x));
}

// out[t][c] = silu(sum_{i<K} w[i][c] * x_ext[t + i][c]) with x_ext = window rows, then the
// sequence's inputs; the window then holds the last K-1 rows of x_ext. One thread per
// (sequence, channel) walks the sequence's inputs with the window in registers. x [T][C] in
// DType (the qkv projection's output), out [T][C] F32, weight_t [K][C] F32.
template <class T>
PITH_HD void causal_conv_silu_body(uint32_t block, uint32_t n_blocks, uint32_t t,
                                   const DeltaSequences& seqs, const float* weight_t, const T* x,
                                   float* out, uint32_t C, uint32_t K) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{seqs.n_seqs} * C, [&](size_t i) {
    const uint32_t s = static_cast<uint32_t>(i / C), c = static_cast<uint32_t>(i % C);
    const uint32_t hist = K - 1;
    float* window = seqs.state(s) + c;  // rows C apart
    float w[kMaxConvHistory];
    for (uint32_t r = 0; r < hist; ++r) w[r] = window[size_t{r} * C];
    const size_t first = seqs.first[s];
    for (uint32_t j = 0; j < seqs.count[s]; ++j) {
      const size_t row = (first + j) * C + c;
      const float xv = to_f32(x[row]);
      float acc = 0;  // the CPU's order: window rows oldest first, then the input
      for (uint32_t r = 0; r < hist; ++r) acc += weight_t[size_t{r} * C + c] * w[r];
      acc += weight_t[size_t{hist} * C + c] * xv;
      out[row] = silu_f32(acc);
      for (uint32_t r = 0; r + 1 < hist; ++r) w[r] = w[r + 1];
      if (hist > 0) w[hist - 1] = xv;
    }
    for (uint32_t r = 0; r < hist; ++r) window[size_t{r} * C] = w[r];
  });
}

// The same outputs for prefills, a thread per (input row, channel) instead of per (sequence,
// channel) walking the rows one after another: row i of the batch belongs to the sequence whose
// first row is the last one <= i (a binary search over seqs.first, ascending), and its window
// rows come from the carried window or the inputs before it. Sums in the serial form's order,
// so the outputs are the same bits. Reads the window, never writes it: causal_conv_window_body
// advances it afterwards, as a separate launch. T = the batch's rows (the sum of the counts).
template <class T>
PITH_HD void causal_conv_silu_rows_body(uint32_t block, uint32_t n_blocks, uint32_t t,
                                        const DeltaSequences& seqs, const float* weight_t,
                                        const T* x, float* out, uint32_t n_rows, uint32_t C,
                                        uint32_t K) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{n_rows} * C, [&](size_t i) {
    const uint32_t row = static_cast<uint32_t>(i / C), c = static_cast<uint32_t>(i % C);
    const uint32_t s = last_at_most(seqs.first, seqs.n_seqs, row);  // row's sequence
    const uint32_t j = row - seqs.first[s], hist = K - 1;
    const float* window = seqs.state(s) + c;  // rows C apart
    const size_t x0 = size_t{seqs.first[s]} * C + c;
    float acc = 0;
    for (uint32_t r = 0; r < hist; ++r) {  // x_ext row j + r: the window's, then the inputs'
      const uint32_t m = j + r;
      const float v = m < hist ? window[size_t{m} * C] : to_f32(x[x0 + size_t{m - hist} * C]);
      acc += weight_t[size_t{r} * C + c] * v;
    }
    acc += weight_t[size_t{hist} * C + c] * to_f32(x[size_t{row} * C + c]);
    out[size_t{row} * C + c] = silu_f32(acc);
  });
}

// The window after causal_conv_silu_rows_body: the last K-1 rows of (window, then the
// sequence's inputs). One thread per (sequence, channel), rows in ascending order: row r takes
// row count + r of that sequence, which it has not overwritten yet.
template <class T>
PITH_HD void causal_conv_window_body(uint32_t block, uint32_t n_blocks, uint32_t t,
                                     const DeltaSequences& seqs, const T* x, uint32_t C,
                                     uint32_t K) {
  grid_stride(block, n_blocks, t, kActivationThreads, size_t{seqs.n_seqs} * C, [&](size_t i) {
    const uint32_t s = static_cast<uint32_t>(i / C), c = static_cast<uint32_t>(i % C);
    const uint32_t hist = K - 1, n = seqs.count[s];
    float* window = seqs.state(s) + c;
    const size_t x0 = size_t{seqs.first[s]} * C + c;
    for (uint32_t r = 0; r < hist; ++r) {
      const uint32_t m = n + r;
      window[size_t{r} * C] =
          m < hist ? window[size_t{m} * C] : to_f32(x[x0 + size_t{m - hist} * C]);
    }
  });
}

// In place x / sqrt(sum x^2 + eps) of each query and key head: block_x = token * heads + head,
// heads = 2 * k_heads (the query heads, then the key heads, at the start of each row of C).
template <class Block>
PITH_HD void l2norm_heads_body(const Block& blk, NormShared& sh, float* mixed, uint32_t C,
                               uint32_t heads, uint32_t dk, float eps) {
  const uint32_t token = blk.block_x / heads, head = blk.block_x % heads;
  float* x = mixed + size_t{token} * C + size_t{head} * dk;
  blk.threads([&](uint32_t t) {
    float ss = 0;
    for (uint32_t j = t; j < dk; j += blk.n_threads) ss += x[j] * x[j];
    sh.partial[t] = ss;
  });
  blk.reduce_sum(sh.partial);
  const float inv = 1.0f / sqrtf(sh.partial[0] + eps);
  blk.threads([&](uint32_t t) {
    for (uint32_t j = t; j < dk; j += blk.n_threads) x[j] *= inv;
  });
}

PITH_HD float softplus_f32(float x) {  // log(1 + e^x), linear above 20 (as the CPU, PyTorch)
#if defined(__CUDA_ARCH__)
  return x > 20.0f ? x : log1pf(expf(x));
#else
  return x > 20.0f ? x : std::log1p(std::exp(x));
#endif
}

// beta = sigmoid(b), g = softplus(a + dt_bias[h]) * A[h] over [T][Hv] (b, a in DType from their
// projections; beta, g F32).
template <class T>
PITH_HD void delta_gates_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* b, const T* a,
                              const float* dt_bias, const float* A, size_t total, uint32_t Hv,
                              float* beta, float* g) {
  grid_stride(block, n_blocks, t, kActivationThreads, total, [&](size_t i) {
    const uint32_t h = static_cast<uint32_t>(i % Hv);
    beta[i] = 1.0f / (1.0f + exp_f32(-to_f32(b[i])));
    g[i] = softplus_f32(to_f32(a[i]) + dt_bias[h]) * A[h];
  });
}

// ---- the recurrent delta rule -------------------------------------------------------------
//
// Block (bx = sequence * Hv + value head, by = group of kDeltaRows value rows), kDeltaThreads
// threads: warp r owns state row j = by * kDeltaRows + r, lane l its columns l, l + 32, ...
// (coalesced), held in registers across the sequence's tokens. Per token, as the CPU's
// recurrent_token: S_j *= exp(g); u = beta (v_j - S_j . k); S_j += u k; o_j = S_j . q / sqrt(dk).
// The two dot products are summed through shared memory (each thread writes its partial, every
// lane of the row then adds the 32 partials in the same order), so a host run of the phases
// gives the device's arithmetic. Written like the attention kernel: phases run through
// `for_threads` (a barrier after each), per-thread registers through `state(tid)`.
inline constexpr uint32_t kDeltaThreads = 128;
inline constexpr uint32_t kDeltaRows = kDeltaThreads / kWarp;
inline constexpr uint32_t kDeltaMaxPerLane = 8;  // k_dim <= 256

struct DeltaRuleParams {
  DeltaSequences seqs;  // layer_offset: this layer's block; matrices after conv_floats
  size_t conv_floats = 0;
  const float* mixed = nullptr;  // [T][C]: q heads | k heads (L2-normed) | v heads
  const float* beta = nullptr;   // [T][Hv]
  const float* g = nullptr;      // [T][Hv]
  void* out = nullptr;           // [T][Hv * dv], DType
  uint32_t C = 0, key_dim = 0, Hv = 0, k_heads = 0, dk = 0, dv = 0;
};

struct DeltaShared {
  float dot_k[kDeltaRows][kWarp];
  float dot_q[kDeltaRows][kWarp];
};

struct DeltaThread {
  float s[kDeltaMaxPerLane];  // this lane's columns of its state row
};

template <class T, class ForThreads, class StateOf>
PITH_HD void delta_rule_block(const DeltaRuleParams& p, uint32_t bx, uint32_t by, DeltaShared& sh,
                              ForThreads&& for_threads, StateOf&& state) {
  const uint32_t seq = bx / p.Hv, hv = bx % p.Hv, hk = hv % p.k_heads;
  const uint32_t n = p.seqs.count[seq];
  if (n == 0) return;  // uniform over the block
  float* S = p.seqs.state(seq) + p.conv_floats + size_t{hv} * p.dv * p.dk;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(p.dk));
  auto row_of = [&](uint32_t tid) { return by * kDeltaRows + tid / kWarp; };
  for_threads([&](uint32_t tid) {
    const uint32_t j = row_of(tid), lane = tid % kWarp;
    // Loops over a lane's columns run to the constant bound (registers, unrolled) and skip
    // the columns past dk.
    PITH_UNROLL for (uint32_t m = 0; m < kDeltaMaxPerLane; ++m) {
      const uint32_t c = lane + m * kWarp;
      state(tid).s[m] = c < p.dk && j < p.dv ? S[size_t{j} * p.dk + c] : 0.0f;
    }
  });
  for (uint32_t t = 0; t < n; ++t) {
    const size_t row = p.seqs.first[seq] + t;
    const float* q = p.mixed + row * p.C + size_t{hk} * p.dk;
    const float* k = q + p.key_dim;
    const float* v = p.mixed + row * p.C + 2 * size_t{p.key_dim} + size_t{hv} * p.dv;
    const float decay = exp_f32(p.g[row * p.Hv + hv]), b = p.beta[row * p.Hv + hv];
    for_threads([&](uint32_t tid) {  // decay, then this lane's share of S_j . k
      const uint32_t lane = tid % kWarp;
      float part = 0;
      PITH_UNROLL for (uint32_t m = 0; m < kDeltaMaxPerLane; ++m) {
        const uint32_t c = lane + m * kWarp;
        if (c >= p.dk) continue;
        float& s = state(tid).s[m];
        s *= decay;
        part += s * k[c];
      }
      sh.dot_k[tid / kWarp][lane] = part;
    });
    for_threads([&](uint32_t tid) {  // the write, then this lane's share of S_j . q
      const uint32_t j = row_of(tid), lane = tid % kWarp;
      float sk = 0;
      for (uint32_t l = 0; l < kWarp; ++l) sk += sh.dot_k[tid / kWarp][l];
      const float u = j < p.dv ? (v[j] - sk) * b : 0.0f;
      float part = 0;
      PITH_UNROLL for (uint32_t m = 0; m < kDeltaMaxPerLane; ++m) {
        const uint32_t c = lane + m * kWarp;
        if (c >= p.dk) continue;
        float& s = state(tid).s[m];
        s += u * k[c];
        part += s * q[c];
      }
      sh.dot_q[tid / kWarp][lane] = part;
    });
    for_threads([&](uint32_t tid) {
      const uint32_t j = row_of(tid);
      if (tid % kWarp != 0 || j >= p.dv) return;
      float o = 0;
      for (uint32_t l = 0; l < kWarp; ++l) o += sh.dot_q[tid / kWarp][l];
      store_f32(static_cast<T*>(p.out) + row * p.Hv * p.dv + size_t{hv} * p.dv + j, o * q_scale);
    });
  }
  for_threads([&](uint32_t tid) {
    const uint32_t j = row_of(tid), lane = tid % kWarp;
    if (j >= p.dv) return;
    PITH_UNROLL for (uint32_t m = 0; m < kDeltaMaxPerLane; ++m) {
      const uint32_t c = lane + m * kWarp;
      if (c < p.dk) S[size_t{j} * p.dk + c] = state(tid).s[m];
    }
  });
}

// ---- the gated query of the hybrid models' attention layers ---------------------------------

// src [T][n_heads][2 hd] (each head's query, then its gate) -> q [T][n_heads][hd] and gate
// [T][n_heads][hd] (DType in and out).
template <class T>
PITH_HD void split_query_gate_body(uint32_t block, uint32_t n_blocks, uint32_t t, const T* src,
                                   size_t n_rows, uint32_t hd, T* q, T* gate) {
  // n_rows = T * n_heads head rows of hd elements each.
  grid_stride(block, n_blocks, t, kActivationThreads, n_rows * hd, [&](size_t i) {
    const size_t r = i / hd, j = i % hd;
    q[i] = src[r * 2 * hd + j];
    gate[i] = src[r * 2 * hd + hd + j];
  });
}

// x[i] *= sigmoid(gate[i]) over `total` elements (DType).
template <class T>
PITH_HD void sigmoid_gate_body(uint32_t block, uint32_t n_blocks, uint32_t t, T* x, const T* gate,
                               size_t total) {
  grid_stride(block, n_blocks, t, kActivationThreads, total, [&](size_t i) {
    store_f32(x + i, to_f32(x[i]) / (1.0f + exp_f32(-to_f32(gate[i]))));
  });
}

}  // namespace pith::cuda::kern
