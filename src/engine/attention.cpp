// Paged softmax attention: task split and the per-query kernel. See attention.h.
#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/attention_kernels.h"
#include "engine/kernels/vector_ops.h"

namespace pith {

namespace {

constexpr uint32_t kQueriesPerTask = 16;
constexpr uint32_t kMaxGroup = 16;  // query heads per task (GQA group), bounded for stack arrays
constexpr uint32_t kMaxRows = kQueriesPerTask * kMaxGroup;  // (query, head) rows of a task

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

// Touches n bytes from p into the cache ahead of their use.
void prefetch_bytes(const std::byte* p, size_t n) {
  for (size_t b = 0; b < n; b += 64) __builtin_prefetch(p + b, 0, 3);
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
  const PieceKernels kern = piece_kernels(hd, shape.dtype);
  const size_t row_bytes = size_t{hd} * shape.elem_bytes();  // one K or V row in the pool

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
          prefetch_bytes(pool_block(s.pages[fetched / ps]) + (fetched % ps) * row_bytes,
                         c * row_bytes);
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
                      (many ? kern.many_scores : kern.scores)(k_block(page) + off * row_bytes, cnt,
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
                    kern.scores(k_block(page) + (off + skip) * row_bytes, cnt - skip, qr + i * hpt,
                                hpt, hd, scale, so);
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
        const float log_z = softmax(row, n_vis[i], isa);
        if (params.sinks) {  // p_j * Z / (Z + e^sink) = p_j / (1 + e^(sink - log Z))
          const float keep = 1.0f / (1.0f + std::exp(params.sinks[task.head + g] - log_z));
          for (size_t j = 0; j < n_vis[i]; ++j) row[j] *= keep;
        }
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
                          v_block(page) + off * row_bytes, cnt, po, nq * hpt, hd, ar);
                    });
    for (uint32_t i = 0; i < nq; ++i) {
      if (n_vis[i] == 0) continue;
      for_visible(s, task.q_begin + i, ps, params.window,
                  [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
                    if (idx + cnt <= shared_end) return;
                    const uint32_t skip = idx < shared_end ? uint32_t(shared_end - idx) : 0;
                    const float* po[kMaxGroup];
                    for (uint32_t g = 0; g < hpt; ++g) po[g] = sr[i * hpt + g] + idx + skip;
                    kern.accumulate(v_block(page) + (off + skip) * row_bytes, cnt - skip, po, hpt,
                                    hd, ar + i * hpt);
                  });
      for (uint32_t g = 0; g < hpt; ++g)
        std::memcpy(s.out + size_t{task.q_begin + i} * q_dim + size_t{task.head + g} * hd,
                    ar[i * hpt + g], hd * sizeof(float));
    }
  });
}

}  // namespace pith
