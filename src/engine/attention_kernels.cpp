// Paged attention's piece kernels (attention_kernels.h): portable, AVX2 and AVX-512, each a
// template over the KV element type. f16 widens with F16C (vcvtph2ps), bf16 with a 16-bit shift;
// f32 is read as it is.
#include "engine/attention_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "common/fp16.h"
#include "engine/kernels/cpu_features.h"
#include "engine/kernels/simd_avx2.h"

namespace pith {

namespace {

// The stored element of a KV dtype.
template <KvDType D>
using Elem = std::conditional_t<D == KvDType::F32, float, uint16_t>;

template <KvDType D>
const Elem<D>* elems(const std::byte* p) {
  return reinterpret_cast<const Elem<D>*>(p);
}

namespace scalar {

template <KvDType D>
float widen(Elem<D> x) {
  if constexpr (D == KvDType::F32) return x;
  if constexpr (D == KvDType::F16) return f16_to_f32(x);
  if constexpr (D == KvDType::BF16) return bf16_to_f32(x);
}

template <KvDType D>
void scores(const std::byte* kb, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
            float scale, float* const* s) {
  const Elem<D>* k = elems<D>(kb);
  for (uint32_t j = 0; j < cnt; ++j, k += hd)
    for (uint32_t g = 0; g < G; ++g) {
      float a = 0;
      for (uint32_t d = 0; d < hd; ++d) a += q[g][d] * widen<D>(k[d]);
      s[g][j] = a * scale;
    }
}

template <KvDType D>
void accumulate(const std::byte* vb, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                float* const* acc) {
  const Elem<D>* v = elems<D>(vb);
  for (uint32_t j = 0; j < cnt; ++j, v += hd)
    for (uint32_t g = 0; g < G; ++g) {
      const float w = p[g][j];
      for (uint32_t d = 0; d < hd; ++d) acc[g][d] += w * widen<D>(v[d]);
    }
}

}  // namespace scalar

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace vavx2 {

// head_dim is a multiple of 8 (checked by the dispatcher). Both kernels walk head_dim in
// chunks of up to 64 elements (8 ymm registers): a query chunk stays in registers across 8 K
// rows, an accumulator chunk across all V rows of the piece, so the loops are bound by loads
// of K/V rows rather than by L1 traffic for q or acc.

#define PITH_AI __attribute__((always_inline)) inline

// 8 elements at p, widened to f32.
template <KvDType D>
PITH_AI __m256 load8(const Elem<D>* p) {
  if constexpr (D == KvDType::F32) return _mm256_loadu_ps(p);
  if constexpr (D == KvDType::F16) return avx2::load_f16(p);
  if constexpr (D == KvDType::BF16) return avx2::load_bf16(p);
}

// acc[r] += q[0..8NV) * k_r[0..8NV) for 8 rows r of stride hd.
template <KvDType D, int NV>
PITH_AI void qk_chunk(const float* q, const Elem<D>* k, uint32_t hd, __m256* acc) {
  __m256 qv[NV];
  for (int v = 0; v < NV; ++v) qv[v] = _mm256_loadu_ps(q + 8 * v);
  for (int r = 0; r < 8; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r] = _mm256_fmadd_ps(qv[v], load8<D>(k + static_cast<size_t>(r) * hd + 8 * v), acc[r]);
}

template <KvDType D>
PITH_AI void qk_tail(const float* q, const Elem<D>* k, uint32_t hd, uint32_t nv, __m256* acc) {
  switch (nv) {
    case 1:
      return qk_chunk<D, 1>(q, k, hd, acc);
    case 2:
      return qk_chunk<D, 2>(q, k, hd, acc);
    case 3:
      return qk_chunk<D, 3>(q, k, hd, acc);
    case 4:
      return qk_chunk<D, 4>(q, k, hd, acc);
    case 5:
      return qk_chunk<D, 5>(q, k, hd, acc);
    case 6:
      return qk_chunk<D, 6>(q, k, hd, acc);
    case 7:
      return qk_chunk<D, 7>(q, k, hd, acc);
    default:
      return;
  }
}

// The 8 horizontal sums of a[0..8) as one vector.
PITH_AI __m256 hsum8(const __m256* a) {
  __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

template <KvDType D>
void scores(const std::byte* kb, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
            float scale, float* const* s) {
  const Elem<D>* k = elems<D>(kb);
  const uint32_t full = hd / 64, tail = (hd % 64) / 8;
  const __m256 vscale = _mm256_set1_ps(scale);
  for (uint32_t g = 0; g < G; ++g) {
    const float* qg = q[g];
    uint32_t j = 0;
    for (; j + 8 <= cnt; j += 8) {
      __m256 acc[8];
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
      const Elem<D>* kj = k + size_t{j} * hd;
      for (uint32_t c = 0; c < full; ++c) qk_chunk<D, 8>(qg + 64 * c, kj + 64 * c, hd, acc);
      if (tail) qk_tail<D>(qg + 64 * full, kj + 64 * full, hd, tail, acc);
      _mm256_storeu_ps(s[g] + j, _mm256_mul_ps(hsum8(acc), vscale));
    }
    for (; j < cnt; ++j) {
      const Elem<D>* kj = k + size_t{j} * hd;
      __m256 a = _mm256_setzero_ps();
      for (uint32_t d = 0; d < hd; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d), load8<D>(kj + d), a);
      s[g][j] = avx2::hsum(a) * scale;
    }
  }
}

// acc[0..8NV) += sum_j p[j] * v_j[0..8NV) over cnt rows of stride hd.
template <KvDType D, int NV>
PITH_AI void pv_chunk(const Elem<D>* v, uint32_t cnt, const float* p, uint32_t hd, float* acc) {
  __m256 a[NV];
  for (int x = 0; x < NV; ++x) a[x] = _mm256_loadu_ps(acc + 8 * x);
  for (uint32_t j = 0; j < cnt; ++j) {
    const __m256 w = _mm256_set1_ps(p[j]);
    const Elem<D>* vj = v + size_t{j} * hd;
    for (int x = 0; x < NV; ++x) a[x] = _mm256_fmadd_ps(w, load8<D>(vj + 8 * x), a[x]);
  }
  for (int x = 0; x < NV; ++x) _mm256_storeu_ps(acc + 8 * x, a[x]);
}

template <KvDType D>
void accumulate(const std::byte* vb, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                float* const* acc) {
  const Elem<D>* v = elems<D>(vb);
  const uint32_t full = hd / 64, tail = (hd % 64) / 8;
  for (uint32_t g = 0; g < G; ++g) {
    for (uint32_t c = 0; c < full; ++c) pv_chunk<D, 8>(v + 64 * c, cnt, p[g], hd, acc[g] + 64 * c);
    const Elem<D>* vt = v + 64 * full;
    float* at = acc[g] + 64 * full;
    switch (tail) {
      case 1:
        pv_chunk<D, 1>(vt, cnt, p[g], hd, at);
        break;
      case 2:
        pv_chunk<D, 2>(vt, cnt, p[g], hd, at);
        break;
      case 3:
        pv_chunk<D, 3>(vt, cnt, p[g], hd, at);
        break;
      case 4:
        pv_chunk<D, 4>(vt, cnt, p[g], hd, at);
        break;
      case 5:
        pv_chunk<D, 5>(vt, cnt, p[g], hd, at);
        break;
      case 6:
        pv_chunk<D, 6>(vt, cnt, p[g], hd, at);
        break;
      case 7:
        pv_chunk<D, 7>(vt, cnt, p[g], hd, at);
        break;
      default:
        break;
    }
  }
}

#undef PITH_AI

}  // namespace vavx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
namespace v512 {

// 16 elements at p, widened to f32. (GCC 12 warns about the undefined pass-through operand
// inside _mm512_cvtph_ps once it is inlined; the instruction has no such input.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <KvDType D>
__attribute__((always_inline)) inline __m512 load16(const Elem<D>* p) {
  if constexpr (D == KvDType::F32) return _mm512_loadu_ps(p);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (D == KvDType::F16) return _mm512_cvtph_ps(h);
  if constexpr (D == KvDType::BF16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#pragma GCC diagnostic pop

// head_dim a multiple of 16. Keys 16 at a time: the piece's K rows transposed into kt[d][16]
// (zero lanes past cnt), then 4 rows at a time s[r][j0 .. j0 + 16) = Σ_d q[r][d] * kt[d] with
// q[r][d] broadcast: 16 products per FMA and no horizontal sums. 16-bit rows are widened 16
// elements at a time into rows[] first, so the transpose reads f32 in every case.
template <KvDType D>
void many_scores(const std::byte* kb, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
                 float scale, float* const* s) {
  if (hd > 256) return vavx2::scores<D>(kb, cnt, q, G, hd, scale, s);
  alignas(64) float kt[256 * 16];
  [[maybe_unused]] alignas(64) float rows[D == KvDType::F32 ? 1 : 16 * 256];
  const Elem<D>* k = elems<D>(kb);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (uint32_t j0 = 0; j0 < cnt; j0 += 16) {
    const uint32_t n = std::min<uint32_t>(16, cnt - j0);
    const float* src;  // the n rows as f32, stride hd
    if constexpr (D == KvDType::F32) {
      src = k + size_t{j0} * hd;
    } else {
      for (uint32_t j = 0; j < n; ++j)
        for (uint32_t d = 0; d < hd; d += 16)
          _mm512_store_ps(rows + j * hd + d, load16<D>(k + size_t{j0 + j} * hd + d));
      src = rows;
    }
    for (uint32_t d = 0; d < hd; ++d) {
      for (uint32_t j = 0; j < n; ++j) kt[d * 16 + j] = src[size_t{j} * hd + d];
      for (uint32_t j = n; j < 16; ++j) kt[d * 16 + j] = 0.0f;
    }
    const __mmask16 m = n == 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    uint32_t g = 0;
    for (; g + 4 <= G; g += 4) {
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                       _mm512_setzero_ps()};
      for (uint32_t d = 0; d < hd; ++d) {
        const __m512 kv = _mm512_load_ps(kt + d * 16);
        for (int r = 0; r < 4; ++r)
          acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[g + r][d]), kv, acc[r]);
      }
      for (int r = 0; r < 4; ++r)
        _mm512_mask_storeu_ps(s[g + r] + j0, m, _mm512_mul_ps(acc[r], vscale));
    }
    for (; g < G; ++g) {
      __m512 acc = _mm512_setzero_ps();
      for (uint32_t d = 0; d < hd; ++d)
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q[g][d]), _mm512_load_ps(kt + d * 16), acc);
      _mm512_mask_storeu_ps(s[g] + j0, m, _mm512_mul_ps(acc, vscale));
    }
  }
}

// acc[r] += Σ_j p[r][j] * v_j, 64 columns and 4 rows at a time: each V row chunk is loaded once
// for the 4 rows, 16 accumulators stay in registers across the piece.
template <KvDType D>
void many_accumulate(const std::byte* vb, uint32_t cnt, const float* const* p, uint32_t G,
                     uint32_t hd, float* const* acc) {
  const Elem<D>* v = elems<D>(vb);
  for (uint32_t c = 0; c < hd; c += 64) {
    const uint32_t nv = std::min<uint32_t>(64, hd - c) / 16;
    uint32_t g = 0;
    for (; g + 4 <= G && nv == 4; g += 4) {
      __m512 a[4][4];
      for (int r = 0; r < 4; ++r)
        for (int x = 0; x < 4; ++x) a[r][x] = _mm512_loadu_ps(acc[g + r] + c + 16 * x);
      for (uint32_t j = 0; j < cnt; ++j) {
        const Elem<D>* vj = v + size_t{j} * hd + c;
        const __m512 v0 = load16<D>(vj), v1 = load16<D>(vj + 16), v2 = load16<D>(vj + 32),
                     v3 = load16<D>(vj + 48);
        for (int r = 0; r < 4; ++r) {
          const __m512 w = _mm512_set1_ps(p[g + r][j]);
          a[r][0] = _mm512_fmadd_ps(w, v0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(w, v1, a[r][1]);
          a[r][2] = _mm512_fmadd_ps(w, v2, a[r][2]);
          a[r][3] = _mm512_fmadd_ps(w, v3, a[r][3]);
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int x = 0; x < 4; ++x) _mm512_storeu_ps(acc[g + r] + c + 16 * x, a[r][x]);
    }
    for (; g < G; ++g)
      for (uint32_t x = 0; x < nv; ++x) {
        __m512 a = _mm512_loadu_ps(acc[g] + c + 16 * x);
        for (uint32_t j = 0; j < cnt; ++j)
          a = _mm512_fmadd_ps(_mm512_set1_ps(p[g][j]), load16<D>(v + size_t{j} * hd + c + 16 * x),
                              a);
        _mm512_storeu_ps(acc[g] + c + 16 * x, a);
      }
  }
}

}  // namespace v512
#pragma GCC pop_options

template <KvDType D>
PieceKernels kernels_for(uint32_t head_dim) {
  if (head_dim % 16 == 0 && best_isa() == KernelIsa::Avx512)
    return {vavx2::scores<D>, vavx2::accumulate<D>, v512::many_scores<D>, v512::many_accumulate<D>};
  if (head_dim % 8 == 0 && best_isa() != KernelIsa::Scalar)
    return {vavx2::scores<D>, vavx2::accumulate<D>, vavx2::scores<D>, vavx2::accumulate<D>};
  return {scalar::scores<D>, scalar::accumulate<D>, scalar::scores<D>, scalar::accumulate<D>};
}

}  // namespace

PieceKernels piece_kernels(uint32_t head_dim, KvDType dtype) {
  switch (dtype) {
    case KvDType::F16:
      return kernels_for<KvDType::F16>(head_dim);
    case KvDType::BF16:
      return kernels_for<KvDType::BF16>(head_dim);
    default:
      return kernels_for<KvDType::F32>(head_dim);
  }
}

}  // namespace pith
