// One warp's 16 x 16 x 16 BF16 tensor-core product with an F32 accumulator, for kernel bodies
// that run on the GPU and on the CPU alike (block.h): nvcuda::wmma on the GPU; on the CPU (the
// host tests and the host simulation) every lane holds the whole tile and computes it alone.
// That is legal because wmma leaves how a fragment's elements are spread over the lanes
// unspecified, and every lane then stores the same values; the simulation pays 32x the work.
//
// All of a warp's lanes must call these together (collective on the GPU). Pointers are to
// shared or global memory, 32-byte aligned; leading dimensions are in elements, multiples of 8
// for BF16 and of 4 for F32 (wmma's rules; the simulation checks the alignment).
#pragma once

#include "engine/cuda/kernels/block.h"

#if defined(__CUDACC__)
#include <mma.h>
#define PITH_MMA_FN __device__ __forceinline__
#else
#define PITH_MMA_FN inline
#endif

namespace pith::cuda::kern {

inline constexpr uint32_t kMmaTile = 16;

#if defined(__CUDACC__)
// After a collective store, before a lane reads what another lane stored.
PITH_MMA_FN void mma_warp_sync() {
  __syncwarp();
}

struct MmaAcc {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
};

PITH_MMA_FN void mma_zero(MmaAcc& acc) {
  nvcuda::wmma::fill_fragment(acc.f, 0.0f);
}
// p[j * ld + i] = acc (i, j) (column-major).
PITH_MMA_FN void mma_store_acc(float* p, uint32_t ld, const MmaAcc& acc) {
  nvcuda::wmma::store_matrix_sync(p, acc.f, ld, nvcuda::wmma::mem_col_major);
}
// acc += A B: A (i, k) = a[i * lda + k] (row-major), B (k, j) = b[j * ldb + k] (column-major:
// column j is 16 consecutive elements, e.g. an input row).
PITH_MMA_FN void mma_bf16(MmaAcc& acc, const Bf16* a, uint32_t lda, const Bf16* b, uint32_t ldb) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::mma_sync(acc.f, fa, fb, acc.f);
}
#else
PITH_MMA_FN void mma_warp_sync() {}

struct MmaAcc {
  float v[kMmaTile][kMmaTile];  // (i, j)
};

PITH_MMA_FN void mma_zero(MmaAcc& acc) {
  for (auto& row : acc.v)
    for (float& x : row) x = 0.0f;
}

PITH_MMA_FN void mma_store_acc(float* p, uint32_t ld, const MmaAcc& acc) {
  PITH_VECTOR_ACCESS(p, 32);
  for (uint32_t j = 0; j < kMmaTile; ++j)
    for (uint32_t i = 0; i < kMmaTile; ++i) p[size_t{j} * ld + i] = acc.v[i][j];
}
PITH_MMA_FN void mma_bf16(MmaAcc& acc, const Bf16* a, uint32_t lda, const Bf16* b, uint32_t ldb) {
  PITH_VECTOR_ACCESS(a, 32);
  PITH_VECTOR_ACCESS(b, 32);
  for (uint32_t i = 0; i < kMmaTile; ++i)
    for (uint32_t j = 0; j < kMmaTile; ++j) {
      float s = acc.v[i][j];
      for (uint32_t k = 0; k < kMmaTile; ++k)
        s += to_f32(a[size_t{i} * lda + k]) * to_f32(b[size_t{j} * ldb + k]);
      acc.v[i][j] = s;
    }
}
#endif

}  // namespace pith::cuda::kern
