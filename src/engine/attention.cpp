// Paged softmax attention: task split and the per-query kernel. See attention.h.
#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/simd_avx2.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

constexpr uint32_t kQueriesPerTask = 16;
constexpr uint32_t kMaxGroup = 16;  // query heads per task (GQA group), bounded for stack arrays
constexpr uint32_t kMaxRows = kQueriesPerTask * kMaxGroup;  // (query, head) rows of a task

// The two inner loops of attention over one page piece (cnt contiguous K or V rows of
// head_dim floats), for G query heads that share the rows' KV head:
//   scores: s[g][j] = scale * q[g] · k[j]
//   accumulate: acc[g] += p[g][j] * v[j]
// One call per page piece, so dispatch is paid per up-to-page_size rows, and each K/V row is
// loaded once for all G heads of a GQA group.
struct PieceKernels {
  void (*scores)(const float* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
                 float scale, float* const* s);
  void (*accumulate)(const float* v, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                     float* const* acc);
  // The same for many rows (a causal chunk's shared prefix: queries x heads), where a piece's
  // K rows are worth transposing once for all of them.
  void (*many_scores)(const float* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
                      float scale, float* const* s);
  void (*many_accumulate)(const float* v, uint32_t cnt, const float* const* p, uint32_t G,
                          uint32_t hd, float* const* acc);
};

namespace scalar {
void scores(const float* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
            float scale, float* const* s) {
  for (uint32_t j = 0; j < cnt; ++j, k += hd)
    for (uint32_t g = 0; g < G; ++g) {
      float a = 0;
      for (uint32_t d = 0; d < hd; ++d) a += q[g][d] * k[d];
      s[g][j] = a * scale;
    }
}
void accumulate(const float* v, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                float* const* acc) {
  for (uint32_t j = 0; j < cnt; ++j, v += hd)
    for (uint32_t g = 0; g < G; ++g) {
      const float w = p[g][j];
      for (uint32_t d = 0; d < hd; ++d) acc[g][d] += w * v[d];
    }
}
}  // namespace scalar

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace vavx2 {

// head_dim is a multiple of 8 (checked by the dispatcher). Both kernels walk head_dim in
// chunks of up to 64 floats (8 ymm registers): a query chunk stays in registers across 8 K
// rows, an accumulator chunk across all V rows of the piece, so the loops are bound by loads
// of K/V rows rather than by L1 traffic for q or acc.

#define PITH_AI __attribute__((always_inline)) inline

// acc[r] += q[0..8NV) * k_r[0..8NV) for 8 rows r of stride hd.
template <int NV>
PITH_AI void qk_chunk(const float* q, const float* k, uint32_t hd, __m256* acc) {
  __m256 qv[NV];
  for (int v = 0; v < NV; ++v) qv[v] = _mm256_loadu_ps(q + 8 * v);
  for (int r = 0; r < 8; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r] =
          _mm256_fmadd_ps(qv[v], _mm256_loadu_ps(k + static_cast<size_t>(r) * hd + 8 * v), acc[r]);
}

PITH_AI void qk_tail(const float* q, const float* k, uint32_t hd, uint32_t nv, __m256* acc) {
  switch (nv) {
    case 1:
      return qk_chunk<1>(q, k, hd, acc);
    case 2:
      return qk_chunk<2>(q, k, hd, acc);
    case 3:
      return qk_chunk<3>(q, k, hd, acc);
    case 4:
      return qk_chunk<4>(q, k, hd, acc);
    case 5:
      return qk_chunk<5>(q, k, hd, acc);
    case 6:
      return qk_chunk<6>(q, k, hd, acc);
    case 7:
      return qk_chunk<7>(q, k, hd, acc);
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

void scores(const float* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
            float scale, float* const* s) {
  const uint32_t full = hd / 64, tail = (hd % 64) / 8;
  const __m256 vscale = _mm256_set1_ps(scale);
  for (uint32_t g = 0; g < G; ++g) {
    const float* qg = q[g];
    uint32_t j = 0;
    for (; j + 8 <= cnt; j += 8) {
      __m256 acc[8];
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
      const float* kj = k + size_t{j} * hd;
      for (uint32_t c = 0; c < full; ++c) qk_chunk<8>(qg + 64 * c, kj + 64 * c, hd, acc);
      if (tail) qk_tail(qg + 64 * full, kj + 64 * full, hd, tail, acc);
      _mm256_storeu_ps(s[g] + j, _mm256_mul_ps(hsum8(acc), vscale));
    }
    for (; j < cnt; ++j) {
      const float* kj = k + size_t{j} * hd;
      __m256 a = _mm256_setzero_ps();
      for (uint32_t d = 0; d < hd; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d), _mm256_loadu_ps(kj + d), a);
      s[g][j] = avx2::hsum(a) * scale;
    }
  }
}

// acc[0..8NV) += sum_j p[j] * v_j[0..8NV) over cnt rows of stride hd.
template <int NV>
PITH_AI void pv_chunk(const float* v, uint32_t cnt, const float* p, uint32_t hd, float* acc) {
  __m256 a[NV];
  for (int x = 0; x < NV; ++x) a[x] = _mm256_loadu_ps(acc + 8 * x);
  for (uint32_t j = 0; j < cnt; ++j) {
    const __m256 w = _mm256_set1_ps(p[j]);
    const float* vj = v + size_t{j} * hd;
    for (int x = 0; x < NV; ++x) a[x] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * x), a[x]);
  }
  for (int x = 0; x < NV; ++x) _mm256_storeu_ps(acc + 8 * x, a[x]);
}

void accumulate(const float* v, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                float* const* acc) {
  const uint32_t full = hd / 64, tail = (hd % 64) / 8;
  for (uint32_t g = 0; g < G; ++g) {
    for (uint32_t c = 0; c < full; ++c) pv_chunk<8>(v + 64 * c, cnt, p[g], hd, acc[g] + 64 * c);
    const float* vt = v + 64 * full;
    float* at = acc[g] + 64 * full;
    switch (tail) {
      case 1:
        pv_chunk<1>(vt, cnt, p[g], hd, at);
        break;
      case 2:
        pv_chunk<2>(vt, cnt, p[g], hd, at);
        break;
      case 3:
        pv_chunk<3>(vt, cnt, p[g], hd, at);
        break;
      case 4:
        pv_chunk<4>(vt, cnt, p[g], hd, at);
        break;
      case 5:
        pv_chunk<5>(vt, cnt, p[g], hd, at);
        break;
      case 6:
        pv_chunk<6>(vt, cnt, p[g], hd, at);
        break;
      case 7:
        pv_chunk<7>(vt, cnt, p[g], hd, at);
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

// head_dim a multiple of 16. Keys 16 at a time: the piece's K rows transposed into kt[d][16]
// (zero lanes past cnt), then 4 rows at a time s[r][j0 .. j0 + 16) = Σ_d q[r][d] * kt[d] with
// q[r][d] broadcast: 16 products per FMA and no horizontal sums.
void many_scores(const float* k, uint32_t cnt, const float* const* q, uint32_t G, uint32_t hd,
                 float scale, float* const* s) {
  alignas(64) float kt[256 * 16];
  if (hd > 256) return vavx2::scores(k, cnt, q, G, hd, scale, s);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (uint32_t j0 = 0; j0 < cnt; j0 += 16) {
    const uint32_t n = std::min<uint32_t>(16, cnt - j0);
    for (uint32_t d = 0; d < hd; ++d) {
      for (uint32_t j = 0; j < n; ++j) kt[d * 16 + j] = k[size_t{j0 + j} * hd + d];
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
void many_accumulate(const float* v, uint32_t cnt, const float* const* p, uint32_t G, uint32_t hd,
                     float* const* acc) {
  for (uint32_t c = 0; c < hd; c += 64) {
    const uint32_t nv = std::min<uint32_t>(64, hd - c) / 16;
    uint32_t g = 0;
    for (; g + 4 <= G && nv == 4; g += 4) {
      __m512 a[4][4];
      for (int r = 0; r < 4; ++r)
        for (int x = 0; x < 4; ++x) a[r][x] = _mm512_loadu_ps(acc[g + r] + c + 16 * x);
      for (uint32_t j = 0; j < cnt; ++j) {
        const float* vj = v + size_t{j} * hd + c;
        const __m512 v0 = _mm512_loadu_ps(vj), v1 = _mm512_loadu_ps(vj + 16),
                     v2 = _mm512_loadu_ps(vj + 32), v3 = _mm512_loadu_ps(vj + 48);
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
          a = _mm512_fmadd_ps(_mm512_set1_ps(p[g][j]),
                              _mm512_loadu_ps(v + size_t{j} * hd + c + 16 * x), a);
        _mm512_storeu_ps(acc[g] + c + 16 * x, a);
      }
  }
}

}  // namespace v512
#pragma GCC pop_options

PieceKernels piece_kernels(uint32_t head_dim) {
  if (head_dim % 16 == 0 && best_isa() == KernelIsa::Avx512)
    return {vavx2::scores, vavx2::accumulate, v512::many_scores, v512::many_accumulate};
  if (head_dim % 8 == 0 && best_isa() != KernelIsa::Scalar)
    return {vavx2::scores, vavx2::accumulate, vavx2::scores, vavx2::accumulate};
  return {scalar::scores, scalar::accumulate, scalar::scores, scalar::accumulate};
}

// Calls fn(page, first_offset, count, running_index) for each page-contiguous piece of the
// visible slots of query i, in slot order.
template <typename Fn>
void for_visible(const AttentionSequence& s, uint32_t i, uint32_t page_size, uint32_t window,
                 Fn&& fn) {
  size_t idx = 0;
  const uint32_t q_slot = s.context_len - s.n_inputs + i;
  const uint32_t first = window > 0 && q_slot + 1 > window ? q_slot + 1 - window : 0;
  auto interval = [&](uint32_t begin, uint32_t end) {
    uint32_t slot = std::max(begin, first);
    while (slot < end) {
      uint32_t page = s.pages[slot / page_size];
      uint32_t off = slot % page_size;
      uint32_t cnt = std::min(page_size - off, end - slot);
      fn(page, off, cnt, idx);
      idx += cnt;
      slot += cnt;
    }
  };
  if (s.mask == nullptr || s.mask->empty()) {
    interval(0, s.context_len - s.n_inputs + i + 1);
    return;
  }
  const std::vector<uint32_t>& runs = (*s.mask)[i];
  uint32_t slot = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (r % 2 == 0) interval(slot, slot + runs[r]);
    slot += runs[r];
  }
}

// Touches n floats from p into the cache ahead of their use.
void prefetch_floats(const float* p, size_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t b = 0; b < n * sizeof(float); b += 64) __builtin_prefetch(c + b, 0, 3);
}

// Pieces prefetched ahead of the one computed. `pith bench model --profile --profile-context
// 1024` (Llama 3.2 1B shape, 2 threads, Zen 4), attention of a batch-32 decode step: 142-168 ms
// without, 118-131 with one piece ahead, 122-127 with two.
constexpr uint32_t kPrefetchPieces = 2;

}  // namespace

void attention(ThreadPool& pool, const KvPool& kv, uint32_t layer, uint32_t n_heads,
               std::span<const AttentionSequence> seqs, AttentionScratch& scratch,
               const AttentionParams& params) {
  const KvShape& shape = kv.shape();
  const uint32_t hd = shape.head_dim_of(layer);
  const uint32_t ps = shape.page_size;
  const uint32_t group = n_heads / shape.heads_of(layer);
  const uint32_t q_dim = n_heads * hd;
  const float scale = params.scale > 0 ? params.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const float cap = params.softcap, inv_cap = cap > 0 ? 1.0f / cap : 0.0f;
  const KernelIsa isa = best_isa();
  const PieceKernels kern = piece_kernels(hd);

  // Heads per task: a whole GQA group (each K/V row read once for the group) unless that
  // leaves too few tasks to keep every worker busy; then single heads.
  uint32_t max_ctx = 0;
  size_t chunks = 0;
  for (const auto& s : seqs) {
    max_ctx = std::max(max_ctx, s.context_len);
    chunks += (s.n_inputs + kQueriesPerTask - 1) / kQueriesPerTask;
  }
  uint32_t hpt = std::min(group, kMaxGroup);
  while (hpt > 1 && (group % hpt != 0 || chunks * (n_heads / hpt) < 2 * pool.size())) --hpt;

  scratch.tasks.clear();
  for (uint32_t si = 0; si < seqs.size(); ++si)
    for (uint32_t h = 0; h < n_heads; h += hpt)
      for (uint32_t b = 0; b < seqs[si].n_inputs; b += kQueriesPerTask)
        scratch.tasks.push_back({si, h, b, std::min(seqs[si].n_inputs, b + kQueriesPerTask)});
  // Score rows and accumulators for every (query, head) of a task: a causal chunk's queries
  // share their common prefix of slots (see below).
  const size_t rows = size_t{kQueriesPerTask} * hpt;
  if (scratch.scores.size() < pool.size()) scratch.scores.resize(pool.size());
  if (scratch.acc.size() < pool.size()) scratch.acc.resize(pool.size());
  for (size_t w = 0; w < pool.size(); ++w) {
    if (scratch.scores[w].size() < size_t{max_ctx} * rows)
      scratch.scores[w].resize(size_t{max_ctx} * rows);
    if (scratch.acc[w].size() < size_t{hd} * rows) scratch.acc[w].resize(size_t{hd} * rows);
  }

  pool.parallel_for(scratch.tasks.size(), [&](size_t task_index, size_t worker) {
    const AttentionScratch::Task& task = scratch.tasks[task_index];
    const AttentionSequence& s = seqs[task.seq];
    const uint32_t kvh = task.head / group;
    // A causal chunk without a window: every query of the chunk sees the slots up to the first
    // one's, so those K/V pieces are read once for all (query, head) rows of the task (from L1,
    // instead of once per query from L2); each query then adds its own few diagonal slots.
    // Per (query, head) the operations are the per-query path's, in the same slot order.
    const bool shared = (s.mask == nullptr || s.mask->empty()) && params.window == 0;
    const uint32_t nq = task.q_end - task.q_begin;
    const uint32_t first_slot = s.context_len - s.n_inputs + task.q_begin;
    const uint32_t shared_end = shared ? first_slot + 1 : 0;  // slots [0, shared_end): all
    const bool many = nq * hpt >= 16;  // enough rows to pay for transposing K (many_scores)
    const float* qr[kMaxRows];
    float* sr[kMaxRows];
    float* ar[kMaxRows];
    size_t n_vis[kQueriesPerTask] = {};
    for (uint32_t i = 0; i < nq; ++i)
      for (uint32_t g = 0; g < hpt; ++g) {
        const uint32_t r = i * hpt + g;
        qr[r] = s.q + size_t{task.q_begin + i} * q_dim + size_t{task.head + g} * hd;
        sr[r] = scratch.scores[worker].data() + size_t{r} * max_ctx;
        ar[r] = scratch.acc[worker].data() + size_t{r} * hd;
      }
    // Slots [0, end) in pieces within pages. Each piece is a short contiguous run (a page's
    // block of this layer and KV head) somewhere else in the pool, which the hardware
    // prefetchers only pick up after its first misses: the next kPrefetchPieces pieces of
    // `pool_block` (the K or V blocks) are prefetched while this one is computed.
    auto shared_pieces = [&](uint32_t end, auto&& pool_block, auto&& fn) {
      uint32_t fetched = 0;  // slots before this one are loaded or prefetched
      for (uint32_t slot = 0; slot < end;) {
        const uint32_t off = slot % ps, cnt = std::min(ps - off, end - slot);
        fetched = std::max(fetched, slot + cnt);  // this piece is loaded now anyway
        while (fetched < end && fetched < slot + cnt + kPrefetchPieces * ps) {
          const uint32_t c = std::min(ps - fetched % ps, end - fetched);
          prefetch_floats(pool_block(s.pages[fetched / ps]) + size_t{fetched % ps} * hd,
                          size_t{c} * hd);
          fetched += c;
        }
        fn(s.pages[slot / ps], off, cnt, size_t{slot});
        slot += cnt;
      }
    };
    auto k_block = [&](uint32_t page) { return kv.k(page, layer, kvh); };
    auto v_block = [&](uint32_t page) { return kv.v(page, layer, kvh); };
    // Pass 1: scaled scores of the visible slots.
    if (shared_end > 0)
      shared_pieces(shared_end, k_block,
                    [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
                      float* so[kMaxRows];
                      for (uint32_t r = 0; r < nq * hpt; ++r) so[r] = sr[r] + idx;
                      (many ? kern.many_scores : kern.scores)(k_block(page) + size_t{off} * hd, cnt,
                                                              qr, nq * hpt, hd, scale, so);
                    });
    for (uint32_t i = 0; i < nq; ++i) {
      n_vis[i] = shared_end;
      for_visible(s, task.q_begin + i, ps, params.window,
                  [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
                    if (idx + cnt <= shared_end) return;  // scored above
                    const uint32_t skip = idx < shared_end ? uint32_t(shared_end - idx) : 0;
                    float* so[kMaxGroup];
                    for (uint32_t g = 0; g < hpt; ++g) so[g] = sr[i * hpt + g] + idx + skip;
                    kern.scores(kv.k(page, layer, kvh) + size_t{off + skip} * hd, cnt - skip,
                                qr + i * hpt, hpt, hd, scale, so);
                    n_vis[i] = idx + cnt;
                  });
      if (n_vis[i] == 0) {  // validation rejects this; keep the output defined anyway
        for (uint32_t g = 0; g < hpt; ++g)
          std::memset(s.out + size_t{task.q_begin + i} * q_dim + size_t{task.head + g} * hd, 0,
                      hd * sizeof(float));
        continue;
      }
      // Softmax (normalised in place), soft-capped first where the family caps.
      for (uint32_t g = 0; g < hpt; ++g) {
        float* row = sr[i * hpt + g];
        if (cap > 0)
          for (size_t j = 0; j < n_vis[i]; ++j) row[j] = cap * std::tanh(row[j] * inv_cap);
        softmax(row, n_vis[i], isa);
        std::memset(ar[i * hpt + g], 0, hd * sizeof(float));
      }
    }
    // Pass 2: the probability-weighted sum of V rows, shared prefix first (slot order kept).
    if (shared_end > 0)
      shared_pieces(shared_end, v_block,
                    [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
                      const float* po[kMaxRows];
                      for (uint32_t r = 0; r < nq * hpt; ++r) po[r] = sr[r] + idx;
                      (many ? kern.many_accumulate : kern.accumulate)(
                          v_block(page) + size_t{off} * hd, cnt, po, nq * hpt, hd, ar);
                    });
    for (uint32_t i = 0; i < nq; ++i) {
      if (n_vis[i] == 0) continue;
      for_visible(s, task.q_begin + i, ps, params.window,
                  [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
                    if (idx + cnt <= shared_end) return;
                    const uint32_t skip = idx < shared_end ? uint32_t(shared_end - idx) : 0;
                    const float* po[kMaxGroup];
                    for (uint32_t g = 0; g < hpt; ++g) po[g] = sr[i * hpt + g] + idx + skip;
                    kern.accumulate(kv.v(page, layer, kvh) + size_t{off + skip} * hd, cnt - skip,
                                    po, hpt, hd, ar + i * hpt);
                  });
      for (uint32_t g = 0; g < hpt; ++g)
        std::memcpy(s.out + size_t{task.q_begin + i} * q_dim + size_t{task.head + g} * hd,
                    ar[i * hpt + g], hd * sizeof(float));
    }
  });
}

}  // namespace pith
