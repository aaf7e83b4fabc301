// Weight panels shared by the panel kernels of both ISA levels: 16-row panels whose 64-byte
// groups hold 4 bytes of every row (gemm_vnni_avx512.cpp, gemm_bf16_avx512.cpp and
// gemv_panels_avx2.cpp read them), packed once at load (pack_all) or per call. Internal to
// engine/kernels; included inside the includer's target region (AVX2 code only, compiled for
// the includer's ISA), so it pushes no target of its own; the includer includes the library
// headers before that region.
//
// Q4KPanels is the Q4_K layout. Decode streams the weights once per token, so its panels must
// not be larger than the file's rows (an unpacked format takes 2.2x). Per panel and 256-block,
// 2368 bytes (16 x 148; the file has 144 per row): 4 unit pairs x 8 groups of 64 bytes, group
// (c, G) holding for each row the file's qs bytes [32c + 4G, 32c + 4G + 4) — their low nibbles
// are quants 4G.. of unit 2c, the high nibbles those of unit 2c + 1 — then the unit scales
// sc[u][row] (bytes), the mins as pairs m[c][row] = (m[2c], m[2c + 1]) (bytes), d[row] and
// dmin[row] (fp16). In a group, rows 0-7 take the first 32 bytes and rows 8-15 the second.
// Bf16Panels is BF16's: the file's bytes regrouped by column pair.
#pragma once

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include "common/error.h"
#include "common/thread_pool.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"
#include "formats/kquants.h"

// Internal linkage: each includer compiles these under its own target.
namespace pith::kernels::panel_gemm {
namespace {

constexpr size_t kPanelRows = 16;
constexpr size_t kTaskRows = 64;  // rows packed per task (4 panels)

// 32-byte quant vectors of 16 rows (rows[r][j]) to 64-byte groups 8j .. 8j + 7 at dst.
inline void store_groups(const __m256i rows[16], uint8_t* dst) {
  for (size_t half = 0; half < 2; ++half) {
    __m256i v[8];
    for (size_t i = 0; i < 8; ++i) v[i] = rows[half * 8 + i];
    avx2::transpose8x8_epi32(v);
    for (size_t g = 0; g < 8; ++g)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + g * 64 + half * 32), v[g]);
  }
}

// All of w's panels (ceil(rows / 16) x nb * F::kBytes), packed over the pool into a 64-byte
// aligned buffer: the load-time panels, whose size per row panel_row_bytes states, so row r's
// panel starts at r * panel_row_bytes(w.dtype, w.cols).
template <typename F>
std::shared_ptr<const void> pack_all(ThreadPool& pool, const WeightMatrix& w) {
  const size_t nb = w.cols / F::kCols, panel_bytes = nb * F::kBytes;
  const size_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  PITH_CHECK(panel_bytes == kPanelRows * panel_row_bytes(w.dtype, w.cols));
  // 2 MiB aligned and marked for huge pages: decode streams these once per token, and with
  // 4 KiB pages every 64 cache lines cost a TLB walk the prefetches wait for.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (n_panels * panel_bytes + kHuge - 1) / kHuge * kHuge;
  std::shared_ptr<uint8_t> buf(
      static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{kHuge})),
      [](uint8_t* p) { ::operator delete (p, std::align_val_t{kHuge}); });
  madvise(buf.get(), bytes, MADV_HUGEPAGE);
  pool.parallel_for(n_panels, [&](size_t p, size_t) {
    const size_t r = p * kPanelRows;
    F::pack(w.row(r), w.row_bytes(), std::min(kPanelRows, w.rows - r), nb,
            buf.get() + p * panel_bytes);
  });
  return buf;
}

struct Q4KPanels {
  static constexpr size_t kCols = kQK;
  static constexpr size_t kScales = 2048, kMins = kScales + 128, kD = kMins + 128, kDmin = kD + 32;
  static constexpr size_t kBytes = kDmin + 32;
  static_assert(kBytes == kPanelRows * 148);

  // Per activation block and unit pair c: (Σ a of unit 2c, Σ a of unit 2c + 1) as two int16.
  using Side = int32_t;
  static constexpr size_t kSidePerBlock = 4;
  static void side(const ActQ8K& a, int32_t* out) {
    for (int c = 0; c < 4; ++c) {
      const auto lo = static_cast<uint16_t>(a.bsums[4 * c] + a.bsums[4 * c + 1]);
      const auto hi = static_cast<uint16_t>(a.bsums[4 * c + 2] + a.bsums[4 * c + 3]);
      out[c] = static_cast<int32_t>(lo | (uint32_t{hi} << 16));
    }
  }

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    for (size_t b = 0; b < nb; ++b, dst += kBytes) {
      uint8_t* sc = dst + kScales;
      uint8_t* mins = dst + kMins;
      uint16_t* d = reinterpret_cast<uint16_t*>(dst + kD);
      uint16_t* dmin = reinterpret_cast<uint16_t*>(dst + kDmin);
      __m256i q[16][4];
      for (size_t r = 0; r < 16; ++r) {
        uint8_t s[8] = {}, m[8] = {};
        d[r] = dmin[r] = 0;  // a padded row: all zero
        for (int c = 0; c < 4; ++c) q[r][c] = _mm256_setzero_si256();
        if (r < n_rows) {
          const auto* w = reinterpret_cast<const BlockQ4_K*>(w0 + r * w_stride) + b;
          for (int c = 0; c < 4; ++c)
            q[r][c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qs + 32 * c));
          unpack_q4k_scales(w->scales, s, m);
          d[r] = w->d;
          dmin[r] = w->dmin;
        }
        for (int u = 0; u < 8; ++u) sc[u * 16 + r] = s[u];
        for (int c = 0; c < 4; ++c) {
          mins[(c * 16 + r) * 2] = m[2 * c];
          mins[(c * 16 + r) * 2 + 1] = m[2 * c + 1];
        }
      }
      for (int c = 0; c < 4; ++c) {
        __m256i rows[16];
        for (size_t r = 0; r < 16; ++r) rows[r] = q[r][c];
        store_groups(rows, dst + c * 8 * 64);
      }
    }
  }
};

// BF16: per 16 rows and 32 columns, 16 groups of 64 bytes (the file's bytes): group g holds the
// column pair (2g, 2g + 1) of every row, rows 0-7 then 8-15.
struct Bf16Panels {
  static constexpr size_t kCols = 32;
  static constexpr size_t kBytes = kPanelRows * 64;

  static void pack(const uint8_t* w0, size_t w_stride, size_t n_rows, size_t nb, uint8_t* dst) {
    for (size_t b = 0; b < nb; ++b, dst += kBytes) {
      for (size_t half = 0; half < 2; ++half) {  // column pairs 0-7, then 8-15
        __m256i rows[16];
        for (size_t r = 0; r < 16; ++r)
          rows[r] = r < n_rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                     w0 + r * w_stride + b * 64 + half * 32))
                               : _mm256_setzero_si256();
        store_groups(rows, dst + half * 8 * 64);
      }
    }
  }
};

}  // namespace
}  // namespace pith::kernels::panel_gemm
