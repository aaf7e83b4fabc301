// The loop nest of the AVX-512 panel GEMMs (gemm_vnni_avx512.cpp: quantised weights with
// vpdpbusd; gemm_bf16_avx512.cpp: BF16 with vdpbf16ps), shared by their weight formats.
// Internal to engine/kernels; included inside the includer's target region (AVX-512 F/BW/VL/DQ
// plus the format's dot instruction), so it pushes no target of its own; the includer includes
// the library headers it uses before that region, so no library code is compiled for AVX-512.
//
// Per task of kTaskRows rows (over the pool) the weights are packed over all K into 16-row
// panels (F::pack), each 64-byte group holding 4 bytes of every row: one 512-bit dot
// instruction then covers 16 rows, with the token's 4 activation bytes broadcast. Then for each
// token chunk whose activations stay in L2, each F::kPanels panels x F::kTokens tokens run
// F::tile over all K and store straight into y[token][row]. Formats whose panels take about the
// file's bytes (Q8_0, BF16, Q4_K's nibble format) can also be packed once at load
// (WeightMatrix::panels); then every call, decode included, streams the panels and skips the
// packing.
//
// A format F provides: Act (one activation block, kCols columns), kBytes (per panel and
// block), pack(w0, stride, n_rows, nb, dst), Side / kSidePerBlock / side(act, out) (values
// computed once per call per activation block), F::kPanels, F::kTokens and
// tile<P, T>(panels, panel_bytes, x, side, nb, accf).
#pragma once

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "common/error.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"
#include "engine/kernels/weight_panels.h"

// Internal linkage: each includer compiles these under its own target.
namespace pith::kernels::panel_gemm {
namespace {

// y[t * ldy + p * 16 + lane] for P panels x T tokens; `valid_last` rows of the last panel are
// stored (16 for a full one).
template <typename F, int P, int T>
void run_tile(const uint8_t* panels, size_t panel_bytes, const typename F::Act* x,
              const typename F::Side* side, size_t nb, float* y, size_t ldy, size_t valid_last) {
  __m512 accf[P][T];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) accf[p][t] = _mm512_setzero_ps();
  F::template tile<P, T>(panels, panel_bytes, x, side, nb, accf);
  const __mmask16 last = valid_last >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid_last) - 1);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
      _mm512_mask_storeu_ps(y + t * ldy + p * kPanelRows, p == P - 1 ? last : __mmask16(0xffff),
                            accf[p][t]);
}

// y = w x. With w.panels (pack_all's layout, made once at load) the tasks read their panels
// from there; otherwise each task packs its rows into the worker's scratch first.
template <typename F>
void gemm(ThreadPool& pool, const WeightMatrix& w, const typename F::Act* x, size_t nb,
          size_t n_tokens, float* y) {
  using Side = typename F::Side;
  const size_t rows = w.rows, wstride = w.row_bytes();
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const size_t panel_bytes = nb * F::kBytes;

  // The per-activation-block values the tiles read beside the quants.
  thread_local std::vector<Side> side_buf;
  const Side* side = nullptr;
  if constexpr (F::kSidePerBlock > 0) {
    const size_t n_blocks = n_tokens * nb;
    if (side_buf.size() < n_blocks * F::kSidePerBlock) side_buf.resize(n_blocks * F::kSidePerBlock);
    Side* out = side_buf.data();
    auto run = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) F::side(x[i], out + i * F::kSidePerBlock);
    };
    constexpr size_t kPerTask = 4096;
    if (n_blocks < 2 * kPerTask)
      run(0, n_blocks);
    else
      pool.parallel_for((n_blocks + kPerTask - 1) / kPerTask, [&](size_t task, size_t) {
        run(task * kPerTask, std::min(n_blocks, (task + 1) * kPerTask));
      });
    side = out;
  }
  // Tokens per pass over a task's panels: their activations (~128 KiB) stay in L2.
  const size_t act_bytes = nb * sizeof(typename F::Act);
  size_t chunk =
      std::max<size_t>(F::kTokens, (size_t{128} << 10) / act_bytes / F::kTokens * F::kTokens);
  chunk = std::min(chunk, n_tokens);

  // A product that streams load-time panels once (decode) takes tasks of ~256 KiB, as the row
  // kernels do: each thread then reads long contiguous runs instead of restarting its
  // prefetches every 64 rows. Per-call packing keeps tasks of kTaskRows (its scratch).
  const size_t task_rows = w.panels != nullptr && n_tokens <= size_t(F::kTokens)
                               ? std::max(kTaskRows, decode_row_block(w, pool.size(), kPanelRows))
                               : kTaskRows;
  const size_t n_tasks = (rows + task_rows - 1) / task_rows;
  pool.parallel_for(n_tasks, [&](size_t task, size_t) {
    const size_t r_begin = task * task_rows, r_end = std::min(rows, r_begin + task_rows);
    const size_t n_panels = (r_end - r_begin + kPanelRows - 1) / kPanelRows;
    const uint8_t* panels;
    if (w.panels != nullptr) {
      panels = static_cast<const uint8_t*>(w.panels) + r_begin / kPanelRows * panel_bytes;
    } else {
      thread_local std::vector<uint8_t> pack_buf;
      if (pack_buf.size() < n_panels * panel_bytes + 64)
        pack_buf.resize(n_panels * panel_bytes + 64);
      uint8_t* packed = pack_buf.data() + (-reinterpret_cast<uintptr_t>(pack_buf.data()) & 63);
      for (size_t p = 0; p < n_panels; ++p) {
        const size_t r = r_begin + p * kPanelRows;
        F::pack(wdata + r * wstride, wstride, std::min(kPanelRows, r_end - r), nb,
                packed + p * panel_bytes);
      }
      panels = packed;
    }
    for (size_t t0 = 0; t0 < n_tokens; t0 += chunk) {
      const size_t t_end = std::min(n_tokens, t0 + chunk);
      for (size_t p = 0; p < n_panels; p += F::kPanels) {
        const int np = static_cast<int>(std::min<size_t>(F::kPanels, n_panels - p));
        const size_t r = r_begin + p * kPanelRows;
        const size_t valid_last = std::min(kPanelRows, r_end - (r + (np - 1) * kPanelRows));
        for (size_t t = t0; t < t_end; t += F::kTokens) {
          const int nt = static_cast<int>(std::min<size_t>(F::kTokens, t_end - t));
          for_tile<F::kPanels, F::kTokens>(np, nt, [&]<int P, int T>() {
            run_tile<F, P, T>(panels + p * panel_bytes, panel_bytes, x + t * nb,
                              side ? side + t * nb * F::kSidePerBlock : nullptr, nb,
                              y + t * rows + r, rows, valid_last);
          });
        }
      }
    }
  });
}

}  // namespace
}  // namespace pith::kernels::panel_gemm
