// The CUDA mixture-of-experts kernel bodies (src/engine/cuda/kernels/moe_body.h) run on the CPU
// over every (block, thread) of their launch grids, chained as the backend chains them (route,
// sort, the experts' gate/up GEMM gathering the tokens, the gated activation over all slots,
// the down GEMM, combine, the shared expert's gated add), against the CPU engine's moe_ffn on
// the same random layer: with and without renormalised weights and a shared expert, F32 and
// BF16 expert weights, and router logits with exact ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "common/thread_pool.h"
#include "cuda_kernels_host_util.h"
#include "engine/cuda/kernels/moe_body.h"
#include "engine/cuda/kernels/moe_mma_body.h"
#include "engine/kernels/vector_ops.h"
#include "engine/moe_ffn.h"

namespace pith::cuda {
namespace {

struct Layer {
  ModelConfig c;
  std::vector<std::vector<float>> store;
  LayerWeights L;

  WeightMatrix matrix(size_t rows, size_t cols, uint32_t seed, bool bf16) {
    std::vector<float> v = random_floats(rows * cols, seed, 0.2f);
    if (bf16)  // the CPU reference sees the weights the BF16 kernel reads
      for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    store.push_back(std::move(v));
    WeightMatrix m;
    m.dtype = DType::F32;
    m.rows = rows;
    m.cols = cols;
    m.data = store.back().data();
    return m;
  }

  Layer(uint32_t d, uint32_t E, uint32_t K, uint32_t ff, uint32_t ff_shared, bool norm, bool bf16) {
    store.reserve(4 * E + 8);
    c.d_model = d;
    c.n_experts = E;
    c.n_experts_used = K;
    c.d_ff_expert = ff;
    c.d_ff_shared_expert = ff_shared;
    c.moe_norm_top_k = norm;
    L.router = matrix(E, d, 1, false);
    for (uint32_t e = 0; e < E; ++e) {
      L.exp_gate.push_back(matrix(ff, d, 10 + e, bf16));
      L.exp_up.push_back(matrix(ff, d, 100 + e, bf16));
      L.exp_down.push_back(matrix(d, ff, 200 + e, bf16));
    }
    if (ff_shared > 0) {
      L.sh_gate = matrix(ff_shared, d, 2, false);
      L.sh_up = matrix(ff_shared, d, 3, false);
      L.sh_down = matrix(d, ff_shared, 4, false);
      L.sh_gate_inp = random_floats(d, 5, 0.3f);
    }
  }

  // The device layout: per expert, gate rows then up rows ([E][2 ff][d]); down [E][d][ff].
  template <class W>
  std::vector<W> stacked(bool gate_up) const {
    std::vector<W> out;
    for (uint32_t e = 0; e < c.n_experts; ++e)
      for (const WeightMatrix* m :
           gate_up ? std::vector<const WeightMatrix*>{&L.exp_gate[e], &L.exp_up[e]}
                   : std::vector<const WeightMatrix*>{&L.exp_down[e]}) {
        const float* p = static_cast<const float*>(m->data);
        for (size_t i = 0; i < m->rows * m->cols; ++i) {
          W w;
          kern::store_f32(&w, p[i]);
          out.push_back(w);
        }
      }
    return out;
  }
};

// moe_sort over its grid: one HostBlock per expert.
void sort_choices(const std::vector<uint32_t>& experts, uint32_t T, uint32_t E, uint32_t K,
                  std::vector<uint32_t>& offsets, std::vector<uint32_t>& slot_token,
                  std::vector<uint32_t>& slot_of) {
  auto sh = std::make_unique<kern::MoeSortShared>();
  for (uint32_t e = 0; e < E; ++e)
    kern::moe_sort_body(kern::HostBlock{e, 0, kern::kMoeThreads}, *sh, experts.data(), T, E, K,
                        offsets.data(), slot_token.data(), slot_of.data());
}

// moe_route's launch on the host: one block per token, its threads one after another.
void route(std::vector<float>& logits, uint32_t T, uint32_t E, uint32_t K, bool norm,
           const float* scale, std::vector<uint32_t>& experts, std::vector<float>& weights) {
  auto sh = std::make_unique<kern::MoeRouteShared>();
  for (uint32_t t = 0; t < T; ++t)
    kern::moe_route_block(kern::HostBlock{t, 0, kern::kMoeRouteThreads}, *sh, logits.data(), E, K,
                          norm, scale, experts.data(), weights.data());
}

// The kernels' chain over the T rows of h; `logits` are the router's outputs (the backend's
// cuBLAS GEMM), overwritten by the route.
template <class W>
std::vector<float> device_chain(const Layer& ly, const std::vector<float>& h,
                                std::vector<float> logits, uint32_t T) {
  const ModelConfig& c = ly.c;
  const uint32_t E = c.n_experts, K = c.n_experts_used, d = c.d_model, ff = c.d_ff_expert;
  std::vector<uint32_t> experts(T * K), offsets(E + 1), slot_token(T * K), slot_of(T * K);
  std::vector<float> weights(T * K);
  route(logits, T, E, K, c.moe_norm_top_k, nullptr, experts, weights);
  sort_choices(experts, T, E, K, offsets, slot_token, slot_of);
  EXPECT_EQ(offsets[E], T * K);

  auto sh = std::make_unique<kern::MoeGemmShared>();
  auto phases = [](auto&& phase) {
    for (uint32_t t = 0; t < kern::kMoeThreads; ++t) phase(t);
  };
  const std::vector<W> wgu = ly.stacked<W>(true), wd = ly.stacked<W>(false);
  std::vector<float> gu(size_t{T} * K * 2 * ff, NAN), act(size_t{T} * K * ff, NAN),
      y(size_t{T} * K * d, NAN);
  for (uint32_t e = 0; e < E; ++e)
    for (uint32_t by = 0; by < (2 * ff + kern::kMoeRows - 1) / kern::kMoeRows; ++by)
      kern::moe_expert_gemm_block(e, by, wgu.data(), 2 * ff, d, h.data(), d, slot_token.data(),
                                  true, offsets.data(), gu.data(), 2 * ff, *sh, phases);
  run_grid(3, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::swiglu_body<1>(bl, nb, t, gu.data(), gu.data() + ff, T * K, ff, 2 * ff, act.data());
  });
  for (uint32_t e = 0; e < E; ++e)
    for (uint32_t by = 0; by < (d + kern::kMoeRows - 1) / kern::kMoeRows; ++by)
      kern::moe_expert_gemm_block(e, by, wd.data(), d, ff, act.data(), ff, slot_token.data(), false,
                                  offsets.data(), y.data(), d, *sh, phases);
  std::vector<float> out(size_t{T} * d, NAN);
  run_grid(2, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::moe_combine_body(bl, nb, t, y.data(), slot_of.data(), weights.data(), T, K, d,
                           out.data());
  });
  if (c.d_ff_shared_expert > 0) {  // the backend's dense GEMMs; here the CPU's
    ThreadPool pool(1);
    const uint32_t fs = c.d_ff_shared_expert;
    std::vector<float> g(size_t{T} * fs), u(g.size()), ysh(size_t{T} * d), gate(T);
    matmul(pool, ly.L.sh_gate, h.data(), T, g.data());
    matmul(pool, ly.L.sh_up, h.data(), T, u.data());
    swiglu(g.data(), u.data(), g.data(), g.size());
    matmul(pool, ly.L.sh_down, g.data(), T, ysh.data());
    for (uint32_t t = 0; t < T; ++t) gate[t] = dot(ly.L.sh_gate_inp.data(), h.data() + t * d, d);
    run_grid(2, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
      kern::moe_add_gated_body(bl, nb, t, ysh.data(), gate.data(), T, d, out.data());
    });
  }
  return out;
}

template <class W>
void check_moe(uint32_t d, uint32_t E, uint32_t K, uint32_t ff, uint32_t ff_shared, bool norm,
               uint32_t T) {
  const Layer ly(d, E, K, ff, ff_shared, norm, std::is_same_v<W, Bf16>);
  const std::vector<float> h = random_floats(size_t{T} * d, 7);
  ThreadPool pool(1);
  std::vector<float> logits(size_t{T} * E), want(size_t{T} * d);
  matmul(pool, ly.L.router, h.data(), T, logits.data());
  MoeScratch scratch;
  moe_ffn(pool, ly.c, ly.L, h.data(), T, want.data(), scratch);
  const std::vector<float> got = device_chain<W>(ly, h, logits, T);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;
}

TEST(CudaMoeHost, RoutedExpertsMatchTheCpu) {
  check_moe<float>(64, 8, 2, 48, 0, true, 7);     // qwen3moe-like: renormalised, no shared
  check_moe<float>(96, 6, 3, 40, 56, false, 20);  // qwen2moe-like: shared expert, raw weights
  check_moe<float>(64, 16, 4, 80, 0, true, 70);   // more than a slot pass per expert
  check_moe<Bf16>(64, 8, 2, 48, 32, true, 9);     // BF16 expert weights
  check_moe<float>(32, 512, 10, 8, 0, true, 12);  // qwen3.5 MoE's router width: 10 of 512
}

// Exact ties among the top experts go to the lower index, in order, with equal weights (the
// CPU's partial_sort over (-prob, expert)); the per-expert scale multiplies the weight.
TEST(CudaMoeHost, RouterTiesGoToTheLowerExpertAndScalesApply) {
  const uint32_t T = 3, E = 8, K = 3;
  std::vector<float> logits = random_floats(size_t{T} * E, 11);
  for (uint32_t t = 0; t < T; ++t) logits[t * E + 1] = logits[t * E + 3] = logits[t * E + 6] = 9;
  std::vector<float> scale(E, 1.0f);
  scale[6] = 0.5f;
  std::vector<uint32_t> experts(T * K);
  std::vector<float> weights(T * K);
  route(logits, T, E, K, true, scale.data(), experts, weights);
  for (uint32_t t = 0; t < T; ++t) {
    EXPECT_EQ(experts[t * K], 1u);
    EXPECT_EQ(experts[t * K + 1], 3u);
    EXPECT_EQ(experts[t * K + 2], 6u);
    EXPECT_FLOAT_EQ(weights[t * K], 1.0f / 3);
    EXPECT_FLOAT_EQ(weights[t * K + 1], 1.0f / 3);
    EXPECT_FLOAT_EQ(weights[t * K + 2], 0.5f / 3);
  }
}

// A NaN router logit (a broken model) poisons every probability; the route still names K
// distinct experts in range, so the sort and the expert GEMM never index past the layer.
TEST(CudaMoeHost, NanRouterLogitsStillNameDistinctExperts) {
  const uint32_t T = 2, E = 8, K = 3;
  std::vector<float> logits = random_floats(size_t{T} * E, 13);
  logits[5] = NAN;
  std::vector<uint32_t> experts(T * K);
  std::vector<float> weights(T * K);
  route(logits, T, E, K, true, nullptr, experts, weights);
  for (uint32_t t = 0; t < T; ++t) {
    std::vector<uint32_t> row(experts.begin() + t * K, experts.begin() + (t + 1) * K);
    for (uint32_t e : row) EXPECT_LT(e, E);
    std::sort(row.begin(), row.end());
    EXPECT_EQ(std::unique(row.begin(), row.end()), row.end()) << "token " << t;
  }
}

// The sort against a serial counting sort: T K choices over several of the block's chunks
// (T K > kMoeThreads, a chunk boundary inside a token's choices), experts nobody chose (empty
// ranges), the first and last experts chosen: slots grouped by expert, tokens ascending.
TEST(CudaMoeHost, SortGroupsChoicesByExpertInTokenOrder) {
  for (const auto& [T, E, K] : {std::tuple{1u, 4u, 1u}, {37u, 16u, 3u}, {700u, 64u, 8u}}) {
    std::mt19937 rng(T);
    std::vector<uint32_t> experts(T * K);
    for (uint32_t t = 0; t < T; ++t) {  // K distinct experts per token, from the odd ones + 0
      std::vector<uint32_t> pool;
      for (uint32_t e = 0; e < E; ++e)
        if (e % 2 == 1 || e == 0) pool.push_back(e);
      std::shuffle(pool.begin(), pool.end(), rng);
      for (uint32_t k = 0; k < K; ++k) experts[t * K + k] = pool[k];
    }
    std::vector<uint32_t> want_offsets(E + 1, 0), want_token, want_of(T * K);
    for (uint32_t e = 0; e < E; ++e) {
      want_offsets[e] = uint32_t(want_token.size());
      for (uint32_t i = 0; i < T * K; ++i)
        if (experts[i] == e) {
          want_of[i] = uint32_t(want_token.size());
          want_token.push_back(i / K);
        }
    }
    want_offsets[E] = T * K;
    std::vector<uint32_t> offsets(E + 1, 7777), slot_token(T * K, 7777), slot_of(T * K, 7777);
    sort_choices(experts, T, E, K, offsets, slot_token, slot_of);
    EXPECT_EQ(offsets, want_offsets) << T;
    EXPECT_EQ(slot_token, want_token) << T;
    EXPECT_EQ(slot_of, want_of) << T;
  }
}

// The expert GEMM's CUDA-core tiles over their whole grid: the reference of its other forms,
// y [n_slots][ld_y].
template <class Out>
std::vector<Out> tiled_expert_gemm(const std::vector<Bf16>& w, uint32_t E, uint32_t rows,
                                   uint32_t cols, const std::vector<Bf16>& x, uint32_t ld_x,
                                   const std::vector<uint32_t>& slot_token, bool gather,
                                   const std::vector<uint32_t>& offsets, size_t ld_y) {
  std::vector<Out> y(slot_token.size() * ld_y);
  auto sh = std::make_unique<kern::MoeGemmShared>();
  auto phases = [](auto&& phase) {
    for (uint32_t t = 0; t < kern::kMoeThreads; ++t) phase(t);
  };
  for (uint32_t e = 0; e < E; ++e)
    for (uint32_t by = 0; by < kern::ceil_div(rows, kern::kMoeRows); ++by)
      kern::moe_expert_gemm_block(e, by, w.data(), rows, cols, x.data(), ld_x, slot_token.data(),
                                  gather, offsets.data(), y.data(), ld_y, *sh, phases);
  return y;
}

// Every slot's rows of `got` against the tiles' `want` (F32 sums in another order; BF16 outputs
// within a rounding step).
template <class Out>
void expect_same_outputs(const std::vector<Out>& want, const std::vector<Out>& got,
                         uint32_t n_slots, uint32_t rows, size_t ld_y, const char* form) {
  for (uint32_t s = 0; s < n_slots; ++s)
    for (uint32_t o = 0; o < rows; ++o) {
      const float a = f(want[s * ld_y + o]), b = f(got[s * ld_y + o]);
      if (sizeof(Out) == 2)
        expect_bf16_near(b, a, form, s * ld_y + o);
      else
        ASSERT_NEAR(b, a, 1e-5f * (1 + std::fabs(a))) << form << ": slot " << s << " row " << o;
    }
}

// The decode form of the expert GEMM (at most 8 tokens, BF16): the GEMV blocks give the tiled
// GEMM's outputs (F32 sums in another order; BF16 outputs within a rounding step), gathered
// and in slot order, on experts with several slots and experts with none.
template <class Out>
void check_expert_gemv(uint32_t T, uint32_t E, uint32_t K, uint32_t rows, uint32_t cols,
                       bool gather) {
  std::mt19937 rng(T * 131 + E);
  std::vector<uint32_t> experts(T * K);
  for (uint32_t t = 0; t < T; ++t) {  // K distinct experts per token among the first E / 2
    std::vector<uint32_t> pool(E / 2);
    for (uint32_t e = 0; e < E / 2; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (uint32_t k = 0; k < K; ++k) experts[t * K + k] = pool[k];
  }
  std::vector<uint32_t> offsets(E + 1), slot_token(T * K), slot_of(T * K);
  sort_choices(experts, T, E, K, offsets, slot_token, slot_of);
  const std::vector<Bf16> w = to_bf16(random_floats(size_t{E} * rows * cols, 3, 0.2f));
  const uint32_t n_x = gather ? T : T * K, ld_x = cols + 8;  // rows ld_x apart
  const std::vector<Bf16> x = to_bf16(random_floats(size_t{n_x} * ld_x, 4));
  const size_t ld_y = rows + 3;
  const std::vector<Out> tiled =
      tiled_expert_gemm<Out>(w, E, rows, cols, x, ld_x, slot_token, gather, offsets, ld_y);
  std::vector<Out> gemv(T * K * ld_y);
  auto vsh = std::make_unique<kern::GemvShared>();
  for (uint32_t j = 0; j < T * K; ++j)  // the launcher's grid: a row of blocks per slot
    for (uint32_t bx = 0; bx < kern::ceil_div(rows, kern::kGemvRowsPerBlock); ++bx)
      kern::moe_expert_gemv_block(kern::HostBlock{bx, j, kern::kGemvThreads}, *vsh, w.data(), E,
                                  rows, cols, x.data(), ld_x, slot_token.data(), gather,
                                  offsets.data(), gemv.data(), ld_y);
  expect_same_outputs(tiled, gemv, T * K, rows, ld_y, "expert gemv");
}

TEST(CudaMoeHost, ExpertGemvOfDecodeStepsEqualsTheTiledGemm) {
  check_expert_gemv<float>(1, 16, 4, 24, 64, true);   // one token: a slot per chosen expert
  check_expert_gemv<float>(8, 8, 3, 13, 200, false);  // 8 tokens among 4 experts, slot order
  check_expert_gemv<Bf16>(5, 12, 2, 40, 1032, true);  // BF16 out, a column tail mid-group
}

// The prefill form on tensor cores (BF16): the MMA blocks give the tiled GEMM's outputs (the
// same BF16 products, F32 sums in another order), gathered and in slot order, with experts of
// more slots than one pass, experts with none, row and column tails, and rows that do not
// allow 16-byte vectors (their elements staged one by one).
template <class Out>
void check_expert_mma(uint32_t T, uint32_t E, uint32_t K, uint32_t rows, uint32_t cols, bool gather,
                      uint32_t x_pad) {
  std::mt19937 rng(T * 17 + E);
  std::vector<uint32_t> experts(T * K);
  for (uint32_t t = 0; t < T; ++t) {    // K distinct experts per token, the low ones favoured
    std::vector<uint32_t> pool(E - 1);  // the last expert gets no token
    for (uint32_t e = 0; e + 1 < E; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    if (t % 3 != 2) std::swap(pool[0], *std::find(pool.begin(), pool.end(), 0u));
    for (uint32_t k = 0; k < K; ++k) experts[t * K + k] = pool[k];
  }
  std::vector<uint32_t> offsets(E + 1), slot_token(T * K), slot_of(T * K);
  sort_choices(experts, T, E, K, offsets, slot_token, slot_of);
  ASSERT_EQ(offsets[E - 1], offsets[E]) << "the last expert has slots";
  const std::vector<Bf16> w = to_bf16(random_floats(size_t{E} * rows * cols, 5, 0.2f));
  const uint32_t n_x = gather ? T : T * K, ld_x = cols + x_pad;
  const std::vector<Bf16> x = to_bf16(random_floats(size_t{n_x} * ld_x, 6));
  const size_t ld_y = rows + 3;
  const std::vector<Out> tiled =
      tiled_expert_gemm<Out>(w, E, rows, cols, x, ld_x, slot_token, gather, offsets, ld_y);
  std::vector<Out> mma(T * K * ld_y);
  auto msh = std::make_unique<kern::MoeMmaShared>();
  const bool vec = kern::vector_ok<kern::kMoeMmaVec>(w.data(), cols, cols) &&
                   kern::vector_ok<kern::kMoeMmaVec>(x.data(), cols, ld_x);
  EXPECT_EQ(vec, cols % 8 == 0 && x_pad % 8 == 0);
  for (uint32_t e = 0; e < E; ++e)
    for (uint32_t by = 0; by < kern::ceil_div(rows, kern::kMoeMmaRows); ++by)
      kern::moe_expert_mma_block(kern::HostBlock{e, by, kern::kMoeMmaThreads}, *msh, w.data(), rows,
                                 cols, x.data(), ld_x, slot_token.data(), gather, offsets.data(),
                                 mma.data(), ld_y, vec);
  expect_same_outputs(tiled, mma, T * K, rows, ld_y, "expert mma");
}

TEST(CudaMoeHost, ExpertMmaOfPrefillsEqualsTheTiledGemm) {
  // 150 tokens, expert 0 in two of three: 100 slots, two passes of 64.
  check_expert_mma<float>(150, 6, 2, 72, 136, true, 8);
  check_expert_mma<float>(40, 5, 3, 130, 64, false, 0);  // slot order, two row tiles and a tail
  check_expert_mma<Bf16>(33, 4, 2, 48, 100, true, 8);    // a column tail past the last vector
  check_expert_mma<float>(20, 4, 1, 20, 45, true, 3);    // no vectors: elements one by one
}

}  // namespace
}  // namespace pith::cuda
