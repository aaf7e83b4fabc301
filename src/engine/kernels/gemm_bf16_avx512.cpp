// The compute-bound path of matmul for BF16 weights on AVX512_BF16 CPUs (prefill and large
// decode batches): the panel GEMM of panel_gemm_avx512.h with vdpbf16ps.
//
// Why: the 4 x 4 register tiles of matmul_avx512.cpp already do 32 products per vdpbf16ps, but
// each of their 16 accumulators holds one row-token pair across K lanes (8 loads per 16 dot
// instructions, a horizontal sum per output). In a 16-row panel each 64-byte group holds one
// column pair of all 16 rows, so a vdpbf16ps with the token's pair broadcast gives 16 rows at
// once: 4 panels x 6 tokens = 24 accumulators, 4 + 6 loads per 24 dot instructions, outputs
// stored as they are. Activations are the bf16 values the tiles use (the same products); only
// the f32 summation order differs.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, see matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <sys/mman.h>

// Everything panel_gemm_avx512.h uses, included before the target region so that no library
// code is compiled for AVX-512 here.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "common/error.h"
#include "engine/kernels/matmul_kernels.h"
#include "engine/kernels/simd_avx2.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#include "engine/kernels/panel_gemm_avx512.h"

namespace pith::kernels {

namespace {

using namespace panel_gemm;

struct Bf16Block {
  uint16_t v[32];
};

struct Bf16Format : Bf16Panels {
  using Act = Bf16Block;
  static constexpr int kPanels = 4, kTokens = 6;

  using Side = int32_t;  // unused
  static constexpr size_t kSidePerBlock = 0;
  static void side(const Bf16Block&, int32_t*) {}

  template <int P, int T>
  static void tile(const uint8_t* panels, size_t panel_bytes, const Bf16Block* x, const int32_t*,
                   size_t nb, __m512 (&accf)[P][T]) {
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panels + b * kBytes;
#pragma GCC unroll 4
      for (int g = 0; g < 16; ++g) {
        __m512bh wv[P];
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p)
          wv[p] = (__m512bh)_mm512_loadu_si512(blk + p * panel_bytes + g * 64);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          int32_t pair;
          __builtin_memcpy(&pair, x[t * nb + b].v + 2 * g, 4);
          const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) accf[p][t] = _mm512_dpbf16_ps(accf[p][t], wv[p], av);
        }
      }
    }
  }
};

}  // namespace

std::shared_ptr<const void> pack_panels_bf16_avx512(ThreadPool& pool, const WeightMatrix& w) {
  if (w.dtype != DType::BF16 || !cpu_features().avx512bf16 || w.cols % 32 != 0) return nullptr;
  return pack_all<Bf16Format>(pool, w);
}

void gemm_bf16_avx512(ThreadPool& pool, const WeightMatrix& w, const PreparedActs& x,
                      size_t n_tokens, float* y) {
  gemm<Bf16Format>(pool, w, reinterpret_cast<const Bf16Block*>(x.bf16), w.cols / 32, n_tokens, y);
}

}  // namespace pith::kernels

#pragma GCC pop_options
