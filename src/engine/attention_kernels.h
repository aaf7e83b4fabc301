// The inner loops of paged attention (attention.h) over one page piece: cnt contiguous K or V
// rows of head_dim elements, stored as the pool's KvDType and widened to f32 as they are read.
// For G (query, head) rows that share the piece's KV head:
//   scores:     s[g][j] = scale * q[g] · k[j]
//   accumulate: acc[g] += p[g][j] * v[j]
// One call per page piece, so dispatch is paid per up-to-page_size rows, and each K/V row is
// loaded once for all G rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/kv_dtype.h"

namespace pith {

struct PieceKernels {
  void (*scores)(const std::byte* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
                 float scale, float* const* s);
  void (*accumulate)(const std::byte* v, uint32_t cnt, const float* const* p, uint32_t G,
                     uint32_t hd, float* const* acc);
  // The same for many rows (a causal chunk's shared prefix: queries x heads), where a piece's
  // K rows are worth transposing once for all of them.
  void (*many_scores)(const std::byte* k, uint32_t cnt, const float* const* q, uint32_t G,
                      uint32_t hd, float scale, float* const* s);
  void (*many_accumulate)(const std::byte* v, uint32_t cnt, const float* const* p, uint32_t G,
                          uint32_t hd, float* const* acc);
};

// The best kernels this CPU (within the ISA cap) has for rows of head_dim elements of dtype:
// AVX-512 for many rows where head_dim is a multiple of 16, AVX2 where it is a multiple of 8,
// portable code otherwise.
PieceKernels piece_kernels(uint32_t head_dim, KvDType dtype);

}  // namespace pith
