// Paged softmax attention: task split and the per-query kernel. See attention.h.
#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pith {

namespace {

constexpr uint32_t kQueriesPerTask = 16;

// 8 independent accumulators: vectorisable without reassociation flags.
inline float dot(const float* a, const float* b, uint32_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (uint32_t j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

inline void axpy(float a, const float* x, float* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Calls fn(page, first_offset, count, running_index) for each page-contiguous piece of the
// visible slots of query i, in slot order.
template <typename Fn>
void for_visible(const AttentionSequence& s, uint32_t i, uint32_t page_size, Fn&& fn) {
  size_t idx = 0;
  auto interval = [&](uint32_t begin, uint32_t end) {
    uint32_t slot = begin;
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

}  // namespace

void attention(ThreadPool& pool, const KvPool& kv, uint32_t layer, uint32_t n_heads,
               std::span<const AttentionSequence> seqs, AttentionScratch& scratch) {
  const KvShape& shape = kv.shape();
  const uint32_t hd = shape.head_dim;
  const uint32_t ps = shape.page_size;
  const uint32_t group = n_heads / shape.n_kv_heads;
  const uint32_t q_dim = n_heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  uint32_t max_ctx = 0;
  scratch.tasks.clear();
  for (uint32_t si = 0; si < seqs.size(); ++si) {
    max_ctx = std::max(max_ctx, seqs[si].context_len);
    for (uint32_t h = 0; h < n_heads; ++h)
      for (uint32_t b = 0; b < seqs[si].n_inputs; b += kQueriesPerTask)
        scratch.tasks.push_back({si, h, b, std::min(seqs[si].n_inputs, b + kQueriesPerTask)});
  }
  if (scratch.scores.size() < pool.size()) scratch.scores.resize(pool.size());
  if (scratch.acc.size() < pool.size()) scratch.acc.resize(pool.size());
  for (size_t w = 0; w < pool.size(); ++w) {
    if (scratch.scores[w].size() < max_ctx) scratch.scores[w].resize(max_ctx);
    if (scratch.acc[w].size() < hd) scratch.acc[w].resize(hd);
  }

  pool.parallel_for(scratch.tasks.size(), [&](size_t task_index, size_t worker) {
    const AttentionScratch::Task& task = scratch.tasks[task_index];
    const AttentionSequence& s = seqs[task.seq];
    const uint32_t kvh = task.head / group;
    float* scores = scratch.scores[worker].data();
    float* acc = scratch.acc[worker].data();
    for (uint32_t i = task.q_begin; i < task.q_end; ++i) {
      const float* q = s.q + size_t{i} * q_dim + size_t{task.head} * hd;
      // Pass 1: scaled scores of the visible slots, and their max.
      float mx = -INFINITY;
      size_t n_vis = 0;
      for_visible(s, i, ps, [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
        const float* k = kv.k(page, layer, kvh) + size_t{off} * hd;
        for (uint32_t j = 0; j < cnt; ++j) {
          float sc = dot(q, k + size_t{j} * hd, hd) * scale;
          scores[idx + j] = sc;
          mx = std::max(mx, sc);
        }
        n_vis = idx + cnt;
      });
      float* out = s.out + size_t{i} * q_dim + size_t{task.head} * hd;
      if (n_vis == 0) {  // validation rejects this; keep the output defined anyway
        std::memset(out, 0, hd * sizeof(float));
        continue;
      }
      // Softmax numerators; the sum in double as ggml does.
      double sum = 0;
      for (size_t j = 0; j < n_vis; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        sum += scores[j];
      }
      // Pass 2: weighted sum of V rows.
      std::memset(acc, 0, hd * sizeof(float));
      for_visible(s, i, ps, [&](uint32_t page, uint32_t off, uint32_t cnt, size_t idx) {
        const float* v = kv.v(page, layer, kvh) + size_t{off} * hd;
        for (uint32_t j = 0; j < cnt; ++j) axpy(scores[idx + j], v + size_t{j} * hd, acc, hd);
      });
      const float inv = static_cast<float>(1.0 / sum);
      for (uint32_t d = 0; d < hd; ++d) out[d] = acc[d] * inv;
    }
  });
}

}  // namespace pith
