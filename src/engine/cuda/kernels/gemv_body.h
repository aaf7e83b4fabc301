// Body of the skinny BF16 GEMM (a GEMV for n <= kGemvMaxN activation rows): decode steps
// multiply every weight matrix by one to a few rows, where a kernel's only job is to stream the
// weights at the memory's bandwidth. y[t][o] = sum_c w[o][c] x[t][c] for t < N, o < rows: BF16
// weights and inputs, F32 products and sums, y F32 or BF16 (rows ldy apart).
//
// Block x computes output rows [8x, 8x + 8), a warp per row. Lane l of a warp reads the row's
// 16-byte vectors l, l + 32, l + 64, ... (a warp's load is 512 contiguous bytes), four vectors
// issued before any is used, and the same vectors of each x row (hot in L1: every warp of the
// block reads them). The lanes' partial sums meet in a warp butterfly (Block::warp_sum).
// Requires cols % 8 == 0 and w, x 16-byte aligned (gemv_fits).
#pragma once

#include "engine/cuda/kernels/activation_body.h"
#include "engine/cuda/kernels/block.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kGemvThreads = 256;
inline constexpr uint32_t kGemvRowsPerBlock = kGemvThreads / kWarp;  // a warp per output row
inline constexpr uint32_t kGemvMaxN = 8;                             // activation rows at most
inline constexpr uint32_t kGemvVec = 8;       // BF16 elements per 16-byte vector
inline constexpr uint32_t kGemvInFlight = 4;  // vectors a lane loads before using them

struct GemvShared {
  float part[kGemvMaxN][kGemvThreads];  // each thread's partial sums, then each warp's total
};

// Whether the shape and pointers suit the kernel.
inline bool gemv_fits(uint32_t n, uint32_t cols, const void* w, const void* x) {
  return n >= 1 && n <= kGemvMaxN && cols > 0 && cols % kGemvVec == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// The sums: output rows [first_row, first_row + 8) of w ([rows][cols]), a warp per row, for
// n <= N activation rows (x_row(r): row r's input, BF16 [cols], 16-byte aligned). Leaves row
// first_row + w's sum for input r in sh.part[r][32 w] and ends with a barrier. Control flow is
// uniform over the block.
template <uint32_t N, class Block, class XRow>
PITH_HD void gemv_sums(const Block& blk, GemvShared& sh, const Bf16* w, uint32_t rows,
                       uint32_t cols, uint32_t first_row, uint32_t n, XRow&& x_row) {
  const uint32_t vecs = cols / kGemvVec;
  blk.threads([&](uint32_t t) {
    const uint32_t lane = t % kWarp, row = first_row + t / kWarp;
    float acc[N];
    PITH_UNROLL
    for (uint32_t r = 0; r < N; ++r) acc[r] = 0.0f;
    if (row < rows) {
      const Bf16* wr = w + size_t{row} * cols;
      for (uint32_t v0 = lane; v0 < vecs; v0 += kGemvInFlight * kWarp) {
        float wv[kGemvInFlight][kGemvVec];
        PITH_UNROLL
        for (uint32_t u = 0; u < kGemvInFlight; ++u) {
          const uint32_t v = v0 + u * kWarp;
          if (v < vecs) {
            load_n<kGemvVec>(wr + size_t{v} * kGemvVec, wv[u]);
          } else {
            PITH_UNROLL
            for (uint32_t i = 0; i < kGemvVec; ++i) wv[u][i] = 0.0f;
          }
        }
        PITH_UNROLL
        for (uint32_t u = 0; u < kGemvInFlight; ++u) {
          const uint32_t v = v0 + u * kWarp;
          if (v >= vecs) break;
          PITH_UNROLL
          for (uint32_t r = 0; r < N; ++r) {
            if (r >= n) break;
            float xv[kGemvVec];
            load_n<kGemvVec>(x_row(r) + size_t{v} * kGemvVec, xv);
            PITH_UNROLL
            for (uint32_t i = 0; i < kGemvVec; ++i) acc[r] += wv[u][i] * xv[i];
          }
        }
      }
    }
    PITH_UNROLL
    for (uint32_t r = 0; r < N; ++r) sh.part[r][t] = acc[r];
  });
  for (uint32_t r = 0; r < n; ++r) blk.warp_sum(sh.part[r]);
  blk.sync();
}

// gemv_sums, then y_row(r)[o] = the sum of output row o for input r (y_row(r): row r's output).
template <uint32_t N, class Block, class XRow, class YRow>
PITH_HD void gemv_rows_block(const Block& blk, GemvShared& sh, const Bf16* w, uint32_t rows,
                             uint32_t cols, uint32_t first_row, uint32_t n, XRow&& x_row,
                             YRow&& y_row) {
  gemv_sums<N>(blk, sh, w, rows, cols, first_row, n, x_row);
  blk.threads([&](uint32_t t) {
    const uint32_t row = first_row + t / kWarp;
    if (t % kWarp != 0 || row >= rows) return;
    for (uint32_t r = 0; r < n; ++r) store_f32(y_row(r) + row, sh.part[r][t]);
  });
}

// The dense product: block x covers output rows [8x, 8x + 8); x is [N][cols], y [N][ldy].
template <uint32_t N, class Block, class Out>
PITH_HD void gemv_block(const Block& blk, GemvShared& sh, const Bf16* w, uint32_t rows,
                        uint32_t cols, const Bf16* x, Out* y, size_t ldy) {
  gemv_rows_block<N>(
      blk, sh, w, rows, cols, blk.block_x * kGemvRowsPerBlock, N,
      [&](uint32_t r) { return x + size_t{r} * cols; }, [&](uint32_t r) { return y + r * ldy; });
}

// The gate/up projection with the gated activation as its epilogue: w is [2 ff][cols] (the gate
// rows, then the up rows), out [N][ff] = act(gate) * up, each of gate and up rounded to Out
// first as the unfused path stores them, so the two give the same bits from the same sums.
// Block x covers output columns [8x, 8x + 8): a warp streams gate row o, then up row o.
struct GemvGatedShared {
  GemvShared gate, up;
};

template <uint32_t N, bool kGelu, class Block, class Out>
PITH_HD void gemv_gated_block(const Block& blk, GemvGatedShared& sh, const Bf16* w, uint32_t ff,
                              uint32_t cols, const Bf16* x, Out* out) {
  const uint32_t first_row = blk.block_x * kGemvRowsPerBlock;
  auto x_row = [&](uint32_t r) { return x + size_t{r} * cols; };
  gemv_sums<N>(blk, sh.gate, w, ff, cols, first_row, N, x_row);
  gemv_sums<N>(blk, sh.up, w + size_t{ff} * cols, ff, cols, first_row, N, x_row);
  blk.threads([&](uint32_t t) {
    const uint32_t row = first_row + t / kWarp;
    if (t % kWarp != 0 || row >= ff) return;
    for (uint32_t r = 0; r < N; ++r) {
      Out g, u;
      store_f32(&g, sh.gate.part[r][t]);
      store_f32(&u, sh.up.part[r][t]);
      store_f32(out + size_t{r} * ff + row, gated_f32<kGelu>(to_f32(g), to_f32(u)));
    }
  });
}

}  // namespace pith::cuda::kern
