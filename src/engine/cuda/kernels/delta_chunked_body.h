// Bodies of the chunked (parallel) delta rule for prefill: the same recurrence as
// delta_rule_block (delta_net_body.h) over chunks of kDeltaChunk tokens, in the form of the CPU's
// delta_rule_chunked (engine/delta_rule.h). With G_i the running sum of g inside a chunk and S
// the state before it, the chunk's writes u solve (I + M) u = w with
//   M[i][s] = beta_i exp(G_i - G_s) (k_s . k_i)  (s < i),   w_i = beta_i (v_i - exp(G_i) S k_i),
// and then
//   o_i = (exp(G_i) S q_i + sum_{s<=i} exp(G_i - G_s) (k_s . q_i) u_s) / sqrt(dk)
//   S  <- exp(G_last) S + sum_s exp(G_last - G_s) u_s k_s^T.
//
// Two passes. The prep pass (one block per sequence, value head and chunk: every chunk of every
// sequence at once, since nothing in it depends on the state) writes per token row the running
// decay G_i, the decayed query-key products and row i of (I + M)^-1, found by forward
// substitution one column per thread. The state pass (one block per sequence, value head and
// group of kChunkRows state rows: the rows of S evolve independently) walks the chunks in
// order with its rows in shared memory: five phases of small products over the chunk instead of
// three barriers per token, which is where the recurrent kernel spends a long prefill.
#pragma once

#include "engine/cuda/kernels/delta_net_body.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kDeltaChunk = 64;  // tokens per chunk (the CPU's kDeltaRuleChunk)
inline constexpr uint32_t kChunkThreads = 128;
inline constexpr uint32_t kChunkRows = 16;    // state rows per block of the state pass
inline constexpr uint32_t kChunkMaxDk = 256;  // as the recurrent kernel

// Per (token row, value head) results of the prep pass; entries are indexed by the position s
// of the other token within the chunk and exist for s <= i (the token's own position).
struct DeltaChunkScratch {
  float* G = nullptr;     // [T][Hv] running sum of g from the chunk's first token to this one
  float* qk = nullptr;    // [T][Hv][kDeltaChunk] exp(G_i - G_s) (k_s . q_i)
  float* tinv = nullptr;  // [T][Hv][kDeltaChunk] row i of (I + M)^-1 (unit lower triangular)

  PITH_HD size_t at(size_t row, uint32_t hv, uint32_t Hv) const {
    return (row * Hv + hv) * kDeltaChunk;
  }
};

struct DeltaPrepShared {
  float G[kDeltaChunk];
  float M[kDeltaChunk][kDeltaChunk + 1];     // padded: a thread per column reads down a column
  float tinv[kDeltaChunk][kDeltaChunk + 1];  // built column by column, one column per thread
};

PITH_HD float dot_f32(const float* a, const float* b, uint32_t n) {
  float s = 0;
  for (uint32_t c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// Block (bx = sequence * Hv + value head, by = chunk of that sequence), kChunkThreads threads.
template <class ForThreads>
PITH_HD void delta_chunk_prep_block(const DeltaRuleParams& p, const DeltaChunkScratch& x,
                                    uint32_t bx, uint32_t by, DeltaPrepShared& sh,
                                    ForThreads&& for_threads) {
  const uint32_t seq = bx / p.Hv, hv = bx % p.Hv, hk = hv % p.k_heads;
  const uint32_t count = p.seqs.count[seq], c0 = by * kDeltaChunk;
  if (c0 >= count) return;  // uniform over the block
  const uint32_t n = count - c0 < kDeltaChunk ? count - c0 : kDeltaChunk;
  const size_t row0 = size_t{p.seqs.first[seq]} + c0;
  auto q_of = [&](uint32_t i) { return p.mixed + (row0 + i) * p.C + size_t{hk} * p.dk; };
  auto k_of = [&](uint32_t i) { return q_of(i) + p.key_dim; };
  for_threads([&](uint32_t tid) {  // the running decay (n adds, in the CPU's order)
    if (tid != 0) return;
    float acc = 0;
    for (uint32_t i = 0; i < n; ++i) {
      acc += p.g[(row0 + i) * p.Hv + hv];
      sh.G[i] = acc;
      x.G[(row0 + i) * p.Hv + hv] = acc;
    }
  });
  for_threads([&](uint32_t tid) {  // the key-key and key-query products of every pair s <= i
    for (uint32_t idx = tid; idx < n * n; idx += kChunkThreads) {
      const uint32_t i = idx / n, s = idx % n;
      if (s > i) continue;
      const float decay = exp_f32(sh.G[i] - sh.G[s]);
      x.qk[x.at(row0 + i, hv, p.Hv) + s] = decay * dot_f32(k_of(s), q_of(i), p.dk);
      if (s < i)
        sh.M[i][s] = p.beta[(row0 + i) * p.Hv + hv] * decay * dot_f32(k_of(s), k_of(i), p.dk);
    }
  });
  for_threads([&](uint32_t tid) {  // (I + M)^-1 by forward substitution, a column per thread
    for (uint32_t col = tid; col < n; col += kChunkThreads) {
      sh.tinv[col][col] = 1.0f;
      x.tinv[x.at(row0 + col, hv, p.Hv) + col] = 1.0f;
      for (uint32_t i = col + 1; i < n; ++i) {
        float acc = 0;
        for (uint32_t s = col; s < i; ++s) acc += sh.M[i][s] * sh.tinv[s][col];
        sh.tinv[i][col] = -acc;
        x.tinv[x.at(row0 + i, hv, p.Hv) + col] = -acc;
      }
    }
  });
}

struct DeltaChunkShared {
  float S[kChunkRows][kChunkMaxDk + 1];  // this block's state rows (padded: a thread per row)
  float sk[kChunkRows][kDeltaChunk];     // S_j . k_i
  float sq[kChunkRows][kDeltaChunk];     // S_j . q_i
  float w[kDeltaChunk][kChunkRows];      // right-hand sides, then
  float u[kDeltaChunk][kChunkRows];      // the writes
  float G[kDeltaChunk];
  float tail[kDeltaChunk];  // exp(G_last - G_s): each write's decay to the chunk's end
};

// Block (bx = sequence * Hv + value head, by = group of kChunkRows state rows), kChunkThreads
// threads; runs after the prep pass of the same forward.
template <class T, class ForThreads>
PITH_HD void delta_chunk_state_block(const DeltaRuleParams& p, const DeltaChunkScratch& x,
                                     uint32_t bx, uint32_t by, DeltaChunkShared& sh,
                                     ForThreads&& for_threads) {
  const uint32_t seq = bx / p.Hv, hv = bx % p.Hv, hk = hv % p.k_heads;
  const uint32_t count = p.seqs.count[seq], j0 = by * kChunkRows;
  if (count == 0 || j0 >= p.dv) return;  // uniform over the block
  const uint32_t rows = p.dv - j0 < kChunkRows ? p.dv - j0 : kChunkRows, dk = p.dk;
  float* S = p.seqs.state(seq) + p.conv_floats + (size_t{hv} * p.dv + j0) * dk;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for_threads([&](uint32_t tid) {
    for (uint32_t idx = tid; idx < rows * dk; idx += kChunkThreads)
      sh.S[idx / dk][idx % dk] = S[idx];
  });
  for (uint32_t c0 = 0; c0 < count; c0 += kDeltaChunk) {
    const uint32_t n = count - c0 < kDeltaChunk ? count - c0 : kDeltaChunk;
    const size_t row0 = size_t{p.seqs.first[seq]} + c0;
    auto q_of = [&](uint32_t i) { return p.mixed + (row0 + i) * p.C + size_t{hk} * dk; };
    auto k_of = [&](uint32_t i) { return q_of(i) + p.key_dim; };
    for_threads([&](uint32_t tid) {  // the state against the chunk's keys and queries
      for (uint32_t idx = tid; idx < rows * n; idx += kChunkThreads) {
        const uint32_t r = idx % rows, i = idx / rows;
        sh.sk[r][i] = dot_f32(sh.S[r], k_of(i), dk);
        sh.sq[r][i] = dot_f32(sh.S[r], q_of(i), dk);
      }
      for (uint32_t i = tid; i < n; i += kChunkThreads) sh.G[i] = x.G[(row0 + i) * p.Hv + hv];
    });
    for_threads([&](uint32_t tid) {  // right-hand sides and the decays to the chunk's end
      for (uint32_t idx = tid; idx < rows * n; idx += kChunkThreads) {
        const uint32_t r = idx % rows, i = idx / rows;
        const size_t row = row0 + i;
        const float v = p.mixed[row * p.C + 2 * size_t{p.key_dim} + size_t{hv} * p.dv + j0 + r];
        sh.w[i][r] = p.beta[row * p.Hv + hv] * (v - exp_f32(sh.G[i]) * sh.sk[r][i]);
      }
      for (uint32_t s = tid; s < n; s += kChunkThreads) sh.tail[s] = exp_f32(sh.G[n - 1] - sh.G[s]);
    });
    for_threads([&](uint32_t tid) {  // the writes: u = (I + M)^-1 w
      for (uint32_t idx = tid; idx < rows * n; idx += kChunkThreads) {
        const uint32_t r = idx % rows, i = idx / rows;
        const float* t = x.tinv + x.at(row0 + i, hv, p.Hv);
        float acc = 0;
        for (uint32_t s = 0; s <= i; ++s) acc += t[s] * sh.w[s][r];
        sh.u[i][r] = acc;
      }
    });
    for_threads([&](uint32_t tid) {  // the outputs
      for (uint32_t idx = tid; idx < rows * n; idx += kChunkThreads) {
        const uint32_t r = idx % rows, i = idx / rows;
        const float* qk = x.qk + x.at(row0 + i, hv, p.Hv);
        float o = exp_f32(sh.G[i]) * sh.sq[r][i];
        for (uint32_t s = 0; s <= i; ++s) o += qk[s] * sh.u[s][r];
        store_f32(static_cast<T*>(p.out) + (row0 + i) * p.Hv * p.dv + size_t{hv} * p.dv + j0 + r,
                  o * q_scale);
      }
    });
    for_threads([&](uint32_t tid) {  // the state at the chunk's end
      const float decay = exp_f32(sh.G[n - 1]);
      for (uint32_t idx = tid; idx < rows * dk; idx += kChunkThreads) {
        const uint32_t r = idx / dk, c = idx % dk;
        float acc = decay * sh.S[r][c];
        for (uint32_t s = 0; s < n; ++s) acc += sh.tail[s] * sh.u[s][r] * k_of(s)[c];
        sh.S[r][c] = acc;
      }
    });
  }
  for_threads([&](uint32_t tid) {
    for (uint32_t idx = tid; idx < rows * dk; idx += kChunkThreads)
      S[idx] = sh.S[idx / dk][idx % dk];
  });
}

}  // namespace pith::cuda::kern
