// The experts' GEMM on tensor cores (BF16 weights and inputs, F32 sums), for forwards with more
// tokens than the decode GEMV takes (prefills): the same contract as moe_expert_gemm_block
// (moe_body.h), whose CUDA-core tiles multiply every element in F32 from shared memory.
//
// Block (x = expert, y = tile of kMoeMmaRows output rows), kMoeMmaThreads threads = 8 warps, over
// the expert's slots kMoeMmaSlots at a time: per kMoeMmaK-wide step of the inner dimension the
// block stages W's rows and the slots' input rows as BF16 in shared memory (16-byte vectors where
// the rows allow it; zeros past every edge), then warp w multiplies rows 32 (w % 4) of the tile
// by slots 32 (w / 4) as four 16 x 16 accumulators (mma_tile.h) held in registers across the
// steps. At the end of a pass each warp moves its tiles out one at a time through a small
// shared scratch of its own, its lanes writing the rows and slots inside the edges.
#pragma once

#include <type_traits>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/kernels/mma_tile.h"

namespace pith::cuda::kern {

inline constexpr uint32_t kMoeMmaThreads = 256;
inline constexpr uint32_t kMoeMmaWarps = kMoeMmaThreads / kWarp;
inline constexpr uint32_t kMoeMmaRows = 128;  // output rows per block
inline constexpr uint32_t kMoeMmaSlots = 64;  // slots per pass
inline constexpr uint32_t kMoeMmaK = 64;      // inner-dimension step
inline constexpr uint32_t kMoeMmaVec = 8;     // BF16 elements per 16-byte vector
inline constexpr uint32_t kMoeMmaTiles = 4;   // accumulators per warp: 2 row x 2 slot tiles
// Row paddings: 16-byte multiples that keep every fragment 32-byte aligned and spread a warp's
// rows over the shared-memory banks.
inline constexpr uint32_t kMoeMmaLd = kMoeMmaK + 8;     // BF16 staging rows
inline constexpr uint32_t kMoeMmaOutLd = kMmaTile + 8;  // F32 scratch rows (column-major)

struct MoeMmaShared {
  alignas(32) Bf16 w[kMoeMmaRows][kMoeMmaLd];
  alignas(32) Bf16 x[kMoeMmaSlots][kMoeMmaLd];
  alignas(32) float out[kMoeMmaWarps][kMmaTile][kMoeMmaOutLd];  // per warp: [slot][row]
};

// The block's threads as warps: f(warp, lane, lanes) in each of a warp's lanes on the GPU
// (collective calls such as mma_bf16; per-lane work strided by `lanes`), once per warp on the
// CPU (lane 0 of 1). The host simulation runs it in the warp's first lane only, as lane 0 of 1:
// its lanes run one after another, so a second lane would redo the first one's tile work with
// its own accumulators (on the GPU the lanes' collective calls happen together).
template <class Block, class F>
PITH_MMA_FN void for_warps(const Block& blk, F&& f) {
  if constexpr (std::is_same_v<Block, HostBlock>) {
    for (uint32_t warp = 0; warp < blk.n_threads / kWarp; ++warp) f(warp, 0u, 1u);
  } else {
#if defined(__CUDACC__)
    f(threadIdx.x / kWarp, threadIdx.x % kWarp, kWarp);
#elif PITH_CUDA_SIM
    if (threadIdx.x % kWarp == 0) f(threadIdx.x / kWarp, 0u, 1u);
#endif
  }
}

// y[s][r0 + r] = sum_c W_e[r0 + r][c] x(s)[c] for the expert's slots s in [offsets[e],
// offsets[e + 1]), W_e = w + e * rows * cols ([rows][cols]), x(s) = x + (gather ? slot_token[s] :
// s) * ld_x. `vec`: w and x rows allow 16-byte vectors (cols and ld_x multiples of 8, both
// 16-byte aligned; the launcher's vector_ok).
template <class Block, class Out>
PITH_MMA_FN void moe_expert_mma_block(const Block& blk, MoeMmaShared& sh, const Bf16* w,
                                      uint32_t rows, uint32_t cols, const Bf16* x, size_t ld_x,
                                      const uint32_t* slot_token, bool gather,
                                      const uint32_t* offsets, Out* y, size_t ld_y, bool vec) {
  const uint32_t e = blk.block_x, r0 = blk.block_y * kMoeMmaRows;
  const uint32_t s_begin = offsets[e], s_end = offsets[e + 1];
  if (s_begin == s_end || r0 >= rows) return;  // uniform over the block
  const uint32_t n_rows = rows - r0 < kMoeMmaRows ? rows - r0 : kMoeMmaRows;
  const Bf16* we = w + (size_t{e} * rows + r0) * cols;
  constexpr uint32_t kVecsPerRow = kMoeMmaK / kMoeMmaVec;
  // One staged row's vector v of the step at k0: 8 elements of src, zeros past `cols` (or all
  // zeros for a row past the tile's).
  auto stage = [&](const Bf16* src, bool live, uint32_t k0, uint32_t v, Bf16* dst) {
    const uint32_t c0 = k0 + v * kMoeMmaVec;
    if (live && vec && c0 + kMoeMmaVec <= cols) {
      copy_n<kMoeMmaVec>(src + c0, dst);
      return;
    }
    for (uint32_t i = 0; i < kMoeMmaVec; ++i) {
      const bool in = live && c0 + i < cols;
      store_f32(dst + i, in ? to_f32(src[c0 + i]) : 0.0f);
    }
  };
  // A warp's accumulators across the block's phases: registers on the GPU (each lane its share
  // of the fragments); on the CPU, where warps take turns within a phase, one set per warp.
  constexpr bool kHost = std::is_same_v<Block, HostBlock>;
  MmaAcc accs[kHost ? kMoeMmaWarps : 1][kMoeMmaTiles];
  for (uint32_t s0 = s_begin; s0 < s_end; s0 += kMoeMmaSlots) {
    const uint32_t n_slots = s_end - s0 < kMoeMmaSlots ? s_end - s0 : kMoeMmaSlots;
    for_warps(blk, [&](uint32_t warp, uint32_t, uint32_t) {
      for (MmaAcc& a : accs[kHost ? warp : 0]) mma_zero(a);
    });
    for (uint32_t k0 = 0; k0 < cols; k0 += kMoeMmaK) {
      blk.threads([&](uint32_t t) {
        for (uint32_t i = t; i < kMoeMmaRows * kVecsPerRow; i += blk.n_threads) {
          const uint32_t r = i / kVecsPerRow, v = i % kVecsPerRow;
          stage(we + size_t{r} * cols, r < n_rows, k0, v, &sh.w[r][v * kMoeMmaVec]);
        }
        for (uint32_t i = t; i < kMoeMmaSlots * kVecsPerRow; i += blk.n_threads) {
          const uint32_t s = i / kVecsPerRow, v = i % kVecsPerRow;
          const bool live = s < n_slots;
          const uint32_t src = !live ? 0 : gather ? slot_token[s0 + s] : s0 + s;
          stage(x + size_t{src} * ld_x, live, k0, v, &sh.x[s][v * kMoeMmaVec]);
        }
      });
      blk.sync();
      for_warps(blk, [&](uint32_t warp, uint32_t, uint32_t) {
        MmaAcc* acc = accs[kHost ? warp : 0];
        const uint32_t rt = (warp % 4) * 2 * kMmaTile, st = (warp / 4) * 2 * kMmaTile;
        for (uint32_t kk = 0; kk < kMoeMmaK; kk += kMmaTile)
          for (uint32_t i = 0; i < 2; ++i)
            for (uint32_t j = 0; j < 2; ++j)
              mma_bf16(acc[2 * i + j], &sh.w[rt + i * kMmaTile][kk], kMoeMmaLd,
                       &sh.x[st + j * kMmaTile][kk], kMoeMmaLd);
      });
      blk.sync();  // the products have read the tiles before the next step overwrites them
    }
    // Each warp's tiles out through its own scratch: rows inside n_rows, slots inside n_slots.
    for_warps(blk, [&](uint32_t warp, uint32_t lane, uint32_t lanes) {
      const uint32_t rt = (warp % 4) * 2 * kMmaTile, st = (warp / 4) * 2 * kMmaTile;
      float* scratch = &sh.out[warp][0][0];
      for (uint32_t tile = 0; tile < kMoeMmaTiles; ++tile) {
        const uint32_t row0 = rt + (tile / 2) * kMmaTile, slot0 = st + (tile % 2) * kMmaTile;
        mma_store_acc(scratch, kMoeMmaOutLd, accs[kHost ? warp : 0][tile]);
        mma_warp_sync();
        for (uint32_t e = lane; e < kMmaTile * kMmaTile; e += lanes) {
          const uint32_t i = e % kMmaTile, j = e / kMmaTile, r = row0 + i, s = slot0 + j;
          if (r < n_rows && s < n_slots)
            store_f32(y + size_t{s0 + s} * ld_y + r0 + r, scratch[j * kMoeMmaOutLd + i]);
        }
        mma_warp_sync();  // every lane has read the scratch before the next tile's store
      }
    });
    blk.sync();  // the last products have read the tiles before the next pass stages its own
  }
}

}  // namespace pith::cuda::kern
