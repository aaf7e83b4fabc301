// Paged attention against a slow, obviously correct reference (dense double-precision softmax
// attention over the same slots), for head sizes that take the AVX2 path (multiples of 8, with
// and without a 16-wide remainder) and the scalar path (not a multiple of 8), GQA groups,
// shuffled pages, causal and run-length masks, and thread counts that switch between
// per-group and per-head tasks; with a custom query scale, soft-capped scores and a sliding
// window (clipping both causal and masked visibility), and with per-head sink logits (gpt-oss).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/attention.h"
#include "engine/kernels/cpu_features.h"

namespace pith {
namespace {

// Sink logits for up to 8 heads: above, near and below the scores' range.
constexpr float kSinks[8] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, -2.0f, 1.0f, 0.25f};

struct Shape {
  uint32_t head_dim, n_heads, n_kv_heads, page_size;
  size_t threads;
  AttentionParams params{};  // family options: query scale, soft-cap, sliding window
};

// A shape, the KV element type, and the ISA cap (AVX-512 hosts also run the AVX2 kernels).
class AttentionParity : public ::testing::TestWithParam<std::tuple<Shape, KvDType, KernelIsa>> {};

TEST_P(AttentionParity, MatchesDenseReference) {
  const Shape sh = std::get<0>(GetParam());
  ScopedIsaCap cap_isa(std::get<2>(GetParam()));
  const uint32_t layer = 1;
  KvShape ks{2, sh.n_kv_heads, sh.head_dim, sh.page_size, {}, std::get<1>(GetParam())};
  KvPool kv(ks, ks.page_bytes() * 96);
  ThreadPool pool(sh.threads);
  std::mt19937 rng(sh.head_dim * 131 + sh.n_heads);
  std::normal_distribution<float> nd(0.0f, 1.0f);

  // Three sequences: 37 slots with the last 5 as inputs (causal), 20 slots with 3 masked
  // inputs, and a causal prefill of 40 inputs after 30 slots (three query chunks whose shared
  // prefixes end mid-page).
  struct Seq {
    uint32_t ctx, n;
    bool masked;
  };
  std::vector<Seq> specs{{37, 5, false}, {20, 3, true}, {70, 40, false}};
  std::vector<std::vector<uint32_t>> pages;
  std::vector<std::vector<std::vector<uint32_t>>> masks(specs.size());
  std::vector<std::vector<float>> qs, outs;
  std::vector<AttentionSequence> seqs;
  const uint32_t q_dim = sh.n_heads * sh.head_dim;
  for (size_t si = 0; si < specs.size(); ++si) {
    auto p = kv.allocate((specs[si].ctx + sh.page_size - 1) / sh.page_size);
    std::shuffle(p.begin(), p.end(), rng);
    pages.push_back(p);
    for (uint32_t slot = 0; slot < specs[si].ctx; ++slot) {
      std::vector<float> k(ks.kv_dim()), v(ks.kv_dim());
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      kv.write(p[slot / sh.page_size], slot % sh.page_size, layer, k.data(), v.data());
    }
    qs.emplace_back(size_t{specs[si].n} * q_dim);
    for (auto& x : qs.back()) x = nd(rng);
    outs.emplace_back(size_t{specs[si].n} * q_dim, -1.0f);
    if (specs[si].masked) {
      const uint32_t c = specs[si].ctx;
      masks[si] = {{3, 5, c - 8}, {0, 2, 1, 7, c - 10}, {c}};
    }
  }
  for (size_t si = 0; si < specs.size(); ++si)
    seqs.push_back(
        {qs[si].data(), outs[si].data(), specs[si].n, specs[si].ctx, pages[si], &masks[si]});
  AttentionScratch scratch;
  attention(pool, kv, layer, sh.n_heads, seqs, scratch, sh.params);
  const double scale = sh.params.scale > 0 ? sh.params.scale : 1.0 / std::sqrt(double(sh.head_dim));
  const double cap = sh.params.softcap;

  const uint32_t hd = sh.head_dim, group = sh.n_heads / sh.n_kv_heads;
  for (size_t si = 0; si < specs.size(); ++si) {
    const Seq& sp = specs[si];
    for (uint32_t i = 0; i < sp.n; ++i) {
      std::vector<bool> vis(sp.ctx, false);
      if (masks[si].empty()) {
        for (uint32_t s = 0; s <= sp.ctx - sp.n + i; ++s) vis[s] = true;
      } else {
        uint32_t s = 0;
        for (size_t r = 0; r < masks[si][i].size(); ++r)
          for (uint32_t j = 0; j < masks[si][i][r]; ++j, ++s) vis[s] = r % 2 == 0;
      }
      const uint32_t q_slot = sp.ctx - sp.n + i;
      if (sh.params.window > 0)
        for (uint32_t s = 0; s < sp.ctx; ++s)
          if (s + sh.params.window <= q_slot) vis[s] = false;
      for (uint32_t h = 0; h < sh.n_heads; ++h) {
        const float* q = qs[si].data() + size_t{i} * q_dim + size_t{h} * hd;
        const uint32_t kvh = h / group;
        std::vector<double> sc(sp.ctx, -INFINITY);
        double mx = -INFINITY;
        for (uint32_t s = 0; s < sp.ctx; ++s) {
          if (!vis[s]) continue;
          std::vector<float> k(hd);  // as stored (rounded to the pool's type)
          kv.read(pages[si][s / sh.page_size], layer, 0, kvh, s % sh.page_size, k.data());
          double a = 0;
          for (uint32_t d = 0; d < hd; ++d) a += double(q[d]) * k[d];
          sc[s] = a * scale;
          if (cap > 0) sc[s] = cap * std::tanh(sc[s] / cap);
          mx = std::max(mx, sc[s]);
        }
        double sum = 0;
        std::vector<double> out(hd, 0.0);
        for (uint32_t s = 0; s < sp.ctx; ++s) {
          if (!vis[s]) continue;
          double p = std::exp(sc[s] - mx);
          sum += p;
          std::vector<float> v(hd);
          kv.read(pages[si][s / sh.page_size], layer, 1, kvh, s % sh.page_size, v.data());
          for (uint32_t d = 0; d < hd; ++d) out[d] += p * v[d];
        }
        if (sh.params.sinks) sum += std::exp(double(sh.params.sinks[h]) - mx);
        const float* got = outs[si].data() + size_t{i} * q_dim + size_t{h} * hd;
        for (uint32_t d = 0; d < hd; ++d)
          ASSERT_NEAR(got[d], out[d] / sum, 2e-5)
              << "seq " << si << " input " << i << " head " << h;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionParity,
    ::testing::Combine(::testing::Values(Shape{16, 4, 2, 4, 1},  // AVX2, GQA 2, per-group tasks
                                         Shape{16, 4, 2, 4, 3},  // AVX2, per-head tasks
                                         Shape{24, 6, 2, 5,
                                               2},  // AVX2 with an 8-wide remainder, GQA 3
                                         Shape{128, 8, 2, 16, 2},  // Llama-sized heads, GQA 4
                                         Shape{12, 4, 4, 3, 2},    // scalar path (12 % 8 != 0), MHA
                                         Shape{6, 8, 1, 7, 1},     // scalar path, MQA (one KV head)
                                         // window 6 over pages of 4 (clips mid-page)
                                         Shape{16, 4, 2, 4, 2, {0, 0, 6}},
                                         // gemma2-style: scale, soft-cap and window together
                                         Shape{24, 6, 2, 5, 1, {0.3f, 1.5f, 9}},
                                         // soft-cap alone, scalar path
                                         Shape{12, 4, 4, 3, 2, {0, 0.8f, 0}},
                                         // gpt-oss-style sinks: causal chunks, then a window
                                         Shape{16, 8, 2, 4, 2, {0, 0, 0, kSinks}},
                                         Shape{16, 4, 2, 4, 1, {0, 0, 6, kSinks}}),
                       ::testing::Values(KvDType::F32, KvDType::F16, KvDType::BF16),
                       ::testing::Values(KernelIsa::Avx512, KernelIsa::Avx2)),
    [](const ::testing::TestParamInfo<std::tuple<Shape, KvDType, KernelIsa>>& info) {
      const Shape& s = std::get<0>(info.param);
      return "hd" + std::to_string(s.head_dim) + "_h" + std::to_string(s.n_heads) + "_kv" +
             std::to_string(s.n_kv_heads) + "_ps" + std::to_string(s.page_size) + "_t" +
             std::to_string(s.threads) +
             (s.params.window ? "_w" + std::to_string(s.params.window) : "") +
             (s.params.softcap > 0 ? "_cap" : "") + (s.params.scale > 0 ? "_scale" : "") +
             (s.params.sinks ? "_sinks" : "") + "_" +
             std::string(kv_dtype_name(std::get<1>(info.param))) + "_" +
             std::string(isa_name(std::get<2>(info.param)));
    });

}  // namespace
}  // namespace pith
