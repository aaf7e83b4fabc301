// The CUDA backend's small kernels (engine/cuda/kernels.h) on the GPU, through their launchers,
// against the CPU engine: embedding and row moves, add + RMSNorm, RoPE (both pair layouts,
// partial rotary), KV append/copy in the pool layout, SwiGLU, row add/convert, the families'
// bias rows, head norms, GELU-tanh, scale and soft-cap, and softmax + top-K with exact ties at the
// sizes the backend runs (1..256 rows, vocabularies up to 152k, k up to 1024). The CPU unit test
// (tests/unit/cuda_kernels_host_test.cpp) checks the same bodies' arithmetic; this one checks
// the launches, the synchronisation and the device's rounding. It also prints the top-K
// reduction's time (CUDA events) at batch 1, 64 and 256, the experts' GEMM on tensor cores
// against its CUDA-core tiles (both checked and timed), and the decode graphs' fallback from a
// failed capture. Needs a GPU (skips with 77).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "device_vector.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/kernels.h"
#include "engine/kernels/vector_ops.h"
#include "engine/rope.h"
#include "engine/token_distribution.h"
#include "gpu_test_main.h"

namespace pith::cuda {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

// Within one BF16 step of the reference (rounding of a value near a midpoint may differ after
// f32 arithmetic in another order or with FMA).
bool bf16_near(float got, float want) {
  float ulp = std::ldexp(1.0f, std::ilogb(std::max(std::fabs(want), 1e-30f)) - 7);
  return std::fabs(got - want) <= ulp * 1.01f;
}

// d = 2048 takes the launchers' 16-byte vectors, d = 2050 the element path.
class CudaKernelsRows : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CudaKernelsRows, EmbedGatherScatter) {
  const uint32_t vocab = 1000, d = GetParam(), n = 7;
  std::vector<float> table = random_floats(size_t{vocab} * d, 1);
  std::vector<uint16_t> table16 = to_bf16(table);
  std::vector<int32_t> tokens{999, 0, 5, 5, 512, 1, 998};
  Dev<float> dt(table);
  Dev<uint16_t> dt16(table16);
  Dev<int32_t> dtok(tokens);
  Dev<float> out(size_t{n} * d), out16(size_t{n} * d);
  embed_rows(dt.get(), DType::F32, dtok.get(), n, d, out.get(), nullptr);
  embed_rows(dt16.get(), DType::BF16, dtok.get(), n, d, out16.get(), nullptr);
  std::vector<float> h = out.read(), h16 = out16.read();
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < d; ++j) {
      ASSERT_EQ(h[size_t{i} * d + j], table[size_t(tokens[i]) * d + j]);
      ASSERT_EQ(h16[size_t{i} * d + j], bf16_to_f32(table16[size_t(tokens[i]) * d + j]));
    }

  std::vector<uint32_t> idx{6, 2, 0};
  Dev<uint32_t> didx(idx);
  Dev<float> rows(3 * size_t{d});
  gather_rows(out.get(), didx.get(), 3, d, rows.get(), nullptr);
  std::vector<float> g = rows.read();
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t j = 0; j < d; ++j) ASSERT_EQ(g[size_t{i} * d + j], h[size_t{idx[i]} * d + j]);
  std::vector<float> zeros(size_t{n} * d, 0.0f);
  Dev<float> back(zeros);
  scatter_rows(rows.get(), didx.get(), 3, d, back.get(), nullptr);
  std::vector<float> b = back.read();
  for (uint32_t r = 0; r < n; ++r) {
    bool written = std::find(idx.begin(), idx.end(), r) != idx.end();
    for (uint32_t j = 0; j < d; ++j)
      ASSERT_EQ(b[size_t{r} * d + j], written ? h[size_t{r} * d + j] : 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(RowLengths, CudaKernelsRows, ::testing::Values(2048u, 2050u));

TEST(CudaKernels, AddRmsNorm) {
  for (uint32_t d : {64u, 2048u, 4095u}) {
    const uint32_t n = 33;
    const float eps = 1e-5f;
    std::vector<float> res = random_floats(size_t{n} * d, d, 2.0f),
                       delta = random_floats(size_t{n} * d, d + 1);
    std::vector<float> w = random_floats(d, d + 2);
    std::vector<float> want_res = res, want(size_t{n} * d);
    for (uint32_t i = 0; i < n; ++i) {
      add(delta.data() + size_t{i} * d, want_res.data() + size_t{i} * d, d);
      rmsnorm(want_res.data() + size_t{i} * d, w.data(), want.data() + size_t{i} * d, d, eps);
    }
    Dev<float> dres(res), ddelta(delta), dw(w), out(size_t{n} * d);
    Dev<float> dres16(res);
    Dev<uint16_t> out16(size_t{n} * d);
    add_rmsnorm(dres.get(), ddelta.get(), dw.get(), n, d, eps, out.get(), DType::F32, nullptr);
    add_rmsnorm(dres16.get(), ddelta.get(), dw.get(), n, d, eps, out16.get(), DType::BF16, nullptr);
    std::vector<float> r = dres.read(), o = out.read(), o16 = from_bf16(out16.read());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(r[i], want_res[i]) << i;
      ASSERT_NEAR(o[i], want[i], 3e-6f * (1 + std::fabs(want[i]))) << "d=" << d << " i=" << i;
      ASSERT_TRUE(bf16_near(o16[i], bf16_to_f32(f32_to_bf16(want[i]))))
          << o16[i] << " vs " << want[i];
    }
  }
}

TEST(CudaKernels, RopeSwigluAddConvert) {
  const uint32_t n = 9, n_heads = 8, head_dim = 128, half = head_dim / 2;
  ModelConfig cfg;
  cfg.head_dim = head_dim;
  cfg.rope_theta = 500000.0f;
  RopeTable table(cfg);
  std::vector<float> cos_v(size_t{n} * half), sin_v(size_t{n} * half);
  for (uint32_t i = 0; i < n; ++i) table.angles(100 * i + 1, &cos_v[i * half], &sin_v[i * half]);
  std::vector<float> x = random_floats(size_t{n} * n_heads * head_dim, 3), want = x;
  for (uint32_t i = 0; i < n; ++i)
    apply_rope(want.data() + size_t{i} * n_heads * head_dim, n_heads, half, &cos_v[i * half],
               &sin_v[i * half]);
  Dev<float> dx(x), dcos(cos_v), dsin(sin_v);
  rope(dx.get(), DType::F32, n, n_heads, head_dim, half, false, dcos.get(), dsin.get(), nullptr);
  std::vector<float> got = dx.read();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6f) << i;
  // Split halves (qwen/gemma), over a quarter of each head (partial rotary).
  const uint32_t quarter = head_dim / 4;
  want = x;
  for (uint32_t i = 0; i < n; ++i)
    apply_rope_split_half(want.data() + size_t{i} * n_heads * head_dim, n_heads, quarter,
                          &cos_v[i * half], &sin_v[i * half], head_dim);
  std::vector<float> cos_q(size_t{n} * quarter), sin_q(size_t{n} * quarter);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < quarter; ++j) {
      cos_q[i * quarter + j] = cos_v[i * half + j];
      sin_q[i * quarter + j] = sin_v[i * half + j];
    }
  Dev<float> dx2(x), dcq(cos_q), dsq(sin_q);
  rope(dx2.get(), DType::F32, n, n_heads, head_dim, quarter, true, dcq.get(), dsq.get(), nullptr);
  got = dx2.read();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6f) << i;

  // 16-byte vectors, the element path for a width that does not divide, and for rows that
  // start one element past a vector boundary (a 16-byte access there faults on the GPU).
  struct GatedCase {
    uint32_t ff, shift;
  };
  for (const GatedCase c : {GatedCase{1000, 0}, GatedCase{1001, 0}, GatedCase{1000, 1}}) {
    const uint32_t ff = c.ff, ld = 2 * ff;
    std::vector<float> gu = random_floats(c.shift + size_t{n} * ld, 4, 3.0f);
    std::vector<uint16_t> gu16 = to_bf16(gu);
    Dev<float> dgu(gu), dout(c.shift + size_t{n} * ff);
    Dev<uint16_t> dgu16(gu16), dout16(c.shift + size_t{n} * ff);
    gated_activation(dgu.get() + c.shift, dgu.get() + c.shift + ff, n, ff, ld, dout.get() + c.shift,
                     DType::F32, FfnActivation::Silu, nullptr);
    gated_activation(dgu16.get() + c.shift, dgu16.get() + c.shift + ff, n, ff, ld,
                     dout16.get() + c.shift, DType::BF16, FfnActivation::Silu, nullptr);
    std::vector<float> s = dout.read(), s16 = from_bf16(dout16.read());
    for (uint32_t i = 0; i < n; ++i) {
      const size_t row = c.shift + size_t{i} * ld, out_row = c.shift + size_t{i} * ff;
      std::vector<float> w(ff), w16(ff), g16(ff), u16(ff);
      pith::swiglu(gu.data() + row, gu.data() + row + ff, w.data(), ff);
      for (uint32_t j = 0; j < ff; ++j) {
        g16[j] = bf16_to_f32(gu16[row + j]);
        u16[j] = bf16_to_f32(gu16[row + ff + j]);
      }
      pith::swiglu(g16.data(), u16.data(), w16.data(), ff);
      for (uint32_t j = 0; j < ff; ++j) {
        ASSERT_NEAR(s[out_row + j], w[j], 1e-5f * (1 + std::fabs(w[j]))) << "shift " << c.shift;
        ASSERT_TRUE(bf16_near(s16[out_row + j], bf16_to_f32(f32_to_bf16(w16[j]))));
      }
    }
  }

  std::vector<float> base = random_floats(x.size(), 5);
  Dev<float> dbase(base), dbase16(base);
  Dev<float> dx32(x);
  Dev<uint16_t> dx16(to_bf16(x)), conv16(x.size());
  add_rows(dbase.get(), dx32.get(), DType::F32, n, n_heads * head_dim, nullptr);
  add_rows(dbase16.get(), dx16.get(), DType::BF16, n, n_heads * head_dim, nullptr);
  convert_rows(dbase.get(), n, n_heads * head_dim, conv16.get(), DType::BF16, nullptr);
  std::vector<float> a = dbase.read(), a16 = dbase16.read();
  std::vector<uint16_t> c16 = conv16.read();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(a[i], base[i] + x[i]);
    ASSERT_EQ(a16[i], base[i] + bf16_to_f32(f32_to_bf16(x[i])));
    ASSERT_EQ(c16[i], f32_to_bf16(a[i]));
  }
}

// The families' kernels (qwen2/3, gemma): bias rows, per-head norms, GELU-tanh gating, the
// embedding scale and the logit soft-cap, through their launchers.
TEST(CudaKernels, FamilyKernels) {
  const uint32_t n = 7, heads = 4, hd = 128, d = heads * hd;
  const float eps = 1e-6f;
  std::vector<float> x = random_floats(size_t{n} * d, 21, 2.0f), bias = random_floats(d, 22);
  std::vector<float> w = random_floats(hd, 23), want = x;
  for (uint32_t i = 0; i < n; ++i) {
    float* r = want.data() + size_t{i} * d;
    add(bias.data(), r, d);
    for (uint32_t h = 0; h < heads; ++h) rmsnorm(r + h * hd, w.data(), r + h * hd, hd, eps);
  }
  Dev<float> dx(x), dbias(bias), dw(w);
  add_bias(dx.get(), DType::F32, dbias.get(), n, d, nullptr);
  rmsnorm_rows(dx.get(), DType::F32, n * heads, hd, dw.get(), eps, nullptr);
  std::vector<float> got = dx.read();
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 3e-6f * (1 + std::fabs(want[i]))) << i;
  Dev<uint16_t> dx16(to_bf16(x));
  add_bias(dx16.get(), DType::BF16, dbias.get(), n, d, nullptr);
  rmsnorm_rows(dx16.get(), DType::BF16, n * heads, hd, dw.get(), eps, nullptr);
  std::vector<float> got16 = from_bf16(dx16.read());
  for (size_t i = 0; i < x.size(); ++i)  // two BF16 roundings (after the bias, after the norm)
    ASSERT_NEAR(got16[i], want[i], 2e-2f * (1 + std::fabs(want[i]))) << i;

  const uint32_t ff = 1152, ld = 2 * ff;
  std::vector<float> gu = random_floats(size_t{n} * ld, 24, 3.0f);
  Dev<float> dgu(gu), dout(size_t{n} * ff);
  gated_activation(dgu.get(), dgu.get() + ff, n, ff, ld, dout.get(), DType::F32,
                   FfnActivation::GeluTanh, nullptr);
  std::vector<float> g = dout.read();
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<float> ref(ff);
    gelu_tanh_gate(gu.data() + size_t{i} * ld, gu.data() + size_t{i} * ld + ff, ref.data(), ff);
    for (uint32_t j = 0; j < ff; ++j)
      ASSERT_NEAR(g[size_t{i} * ff + j], ref[j], 1e-5f * (1 + std::fabs(ref[j])));
  }

  std::vector<float> logits = random_floats(1000, 25, 40.0f), capped = logits;
  Dev<float> dl(logits), ds(logits);
  soft_cap(dl.get(), logits.size(), 30.0f, nullptr);
  scale_rows(ds.get(), logits.size(), 45.25f, nullptr);
  std::vector<float> gl = dl.read(), gs = ds.read();
  for (float& v : capped) v = 30.0f * std::tanh(v / 30.0f);
  for (size_t i = 0; i < logits.size(); ++i) {
    ASSERT_NEAR(gl[i], capped[i], 1e-5f) << i;
    ASSERT_EQ(gs[i], logits[i] * 45.25f) << i;
  }
}

TEST(CudaKernels, KvAppendAndCopy) {
  KvPoolLayout layout;
  layout.dtype = DType::BF16;
  layout.n_layers = 4;
  layout.n_kv_heads = 8;
  layout.head_dim = 128;
  layout.page_size = 16;
  const uint32_t n_pages = 6, kv_dim = static_cast<uint32_t>(layout.kv_dim());
  std::vector<uint16_t> pool(n_pages * layout.page_elems());
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<uint16_t>(i * 2654435761u >> 16);
  Dev<uint16_t> dpool(pool);
  const uint32_t n = 20, layer = 2;
  std::vector<uint32_t> pages(n), slots(n);
  for (uint32_t i = 0; i < n; ++i) {
    pages[i] = (i * 7) % n_pages;
    slots[i] = (i * 5) % layout.page_size;
  }
  // Distinct (page, slot) pairs: 20 rows over 6 x 16 places.
  std::vector<uint16_t> k(size_t{n} * kv_dim), v(size_t{n} * kv_dim);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<uint16_t>(i);
    v[i] = static_cast<uint16_t>(i + 40000);
  }
  Dev<uint16_t> dk(k), dv(v);
  Dev<uint32_t> dpages(pages), dslots(slots);
  kv_append(dk.get(), dv.get(), n, dpages.get(), dslots.get(), layer, layout, dpool.get(), nullptr);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t c = 0; c < kv_dim; ++c) {
      pool[layout.block_offset(pages[i], layer, 0) + slots[i] * kv_dim + c] = k[i * kv_dim + c];
      pool[layout.block_offset(pages[i], layer, 1) + slots[i] * kv_dim + c] = v[i * kv_dim + c];
    }
  ASSERT_EQ(dpool.read(), pool);

  struct Case {
    uint32_t src_page, dst_page, src_slot, dst_slot, n;
  };
  for (Case c :
       {Case{1, 4, 0, 3, 13}, Case{2, 2, 0, 5, 11}, Case{2, 2, 5, 0, 11}, Case{3, 0, 0, 0, 16}}) {
    kv_copy(c.src_page, c.dst_page, c.src_slot, c.dst_slot, c.n, layout, dpool.get(), nullptr);
    for (uint32_t l = 0; l < layout.n_layers; ++l)
      for (uint32_t kv = 0; kv < 2; ++kv)
        std::memmove(pool.data() + layout.block_offset(c.dst_page, l, kv) + c.dst_slot * kv_dim,
                     pool.data() + layout.block_offset(c.src_page, l, kv) + c.src_slot * kv_dim,
                     size_t{c.n} * kv_dim * sizeof(uint16_t));
    ASSERT_EQ(dpool.read(), pool) << c.src_page << "/" << c.src_slot << " -> " << c.dst_page << "/"
                                  << c.dst_slot;
  }
}

// softmax_topk over `rows` rows against top_k_distribution row by row.
void check_topk(const std::vector<float>& logits, uint32_t rows, uint32_t vocab,
                const std::vector<uint32_t>& ks, uint32_t k_max) {
  Dev<float> dl(logits);
  Dev<uint32_t> dks(ks);
  Dev<unsigned char> ws(topk_workspace_bytes(rows, vocab, k_max));
  std::vector<int32_t> init_ids(size_t{rows} * k_max, -1);
  Dev<int32_t> ids(init_ids);
  Dev<float> probs(size_t{rows} * k_max);
  softmax_topk(dl.get(), rows, vocab, dks.get(), k_max, ws.get(), ids.get(), probs.get(), nullptr);
  std::vector<int32_t> got = ids.read();
  std::vector<float> p = probs.read();
  for (uint32_t r = 0; r < rows; ++r) {
    TokenDistribution want =
        top_k_distribution(logits.data() + size_t{r} * vocab, vocab, std::min(ks[r], k_max));
    std::vector<int32_t> g(got.begin() + size_t{r} * k_max,
                           got.begin() + size_t{r} * k_max + want.ids.size());
    ASSERT_EQ(g, want.ids) << "row " << r << " of " << rows << ", vocab " << vocab << ", k "
                           << ks[r];
    for (size_t i = 0; i < want.ids.size(); ++i)
      ASSERT_NEAR(p[size_t{r} * k_max + i], want.probs[i], 2e-6 + 1e-5 * want.probs[i]);
    for (size_t i = want.ids.size(); i < k_max; ++i) ASSERT_EQ(got[size_t{r} * k_max + i], -1);
  }
}

TEST(CudaKernels, SoftmaxTopKMatchesCpu) {
  for (uint32_t vocab : {1u, 2049u, 32000u, 128256u, 151936u})
    for (uint32_t rows : {1u, 7u, 64u}) {
      if (kOnHostSimulation && rows == 64 && vocab >= 32000) continue;  // minutes there
      std::vector<float> logits = random_floats(size_t{rows} * vocab, vocab + rows, 4.0f);
      std::vector<uint32_t> ks(rows);
      for (uint32_t r = 0; r < rows; ++r) ks[r] = r % 4 == 0 ? 1 : (r * 131) % 1025;
      check_topk(logits, rows, vocab, ks, 1024);
      for (uint32_t r = 0; r < rows; ++r) ks[r] = 1 + r % 50;
      check_topk(logits, rows, vocab, ks, 50);
    }
}

TEST(CudaKernels, SoftmaxTopKTies) {
  // 24 rows still meet every (k, whole-row tie) combination (rows repeat every 12).
  const uint32_t rows = kOnHostSimulation ? 24 : 256, vocab = 128256;
  std::vector<float> logits = random_floats(size_t{rows} * vocab, 9, 2.0f);
  for (auto& x : logits) x = std::round(x * 2) / 2;  // thousands of exact ties
  for (uint32_t r = 0; r < rows; r += 3)             // whole rows of one value: the first k ids
    std::fill(logits.begin() + size_t{r} * vocab, logits.begin() + size_t{r + 1} * vocab, 0.5f);
  std::vector<uint32_t> ks(rows);
  for (uint32_t r = 0; r < rows; ++r) ks[r] = std::vector<uint32_t>{1, 20, 1024, 513}[r % 4];
  check_topk(logits, rows, vocab, ks, 1024);
}

TEST(CudaKernels, SoftmaxTopKTiming) {
  PITH_SKIP_TIMING_ON_SIM();
  const uint32_t vocab = 128256, k = 50;
  for (uint32_t rows : {1u, 64u, 256u}) {
    std::vector<float> logits = random_floats(size_t{rows} * vocab, rows, 3.0f);
    Dev<float> dl(logits);
    Dev<uint32_t> dks(std::vector<uint32_t>(rows, k));
    Dev<unsigned char> ws(topk_workspace_bytes(rows, vocab, k));
    Dev<int32_t> ids(size_t{rows} * k);
    Dev<float> probs(size_t{rows} * k);
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    const int iters = 20;
    softmax_topk(dl.get(), rows, vocab, dks.get(), k, ws.get(), ids.get(), probs.get(), nullptr);
    CUDA_OK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i)
      softmax_topk(dl.get(), rows, vocab, dks.get(), k, ws.get(), ids.get(), probs.get(), nullptr);
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    std::printf("softmax_topk rows=%u vocab=%u k=%u: %.1f us (logits %.1f MB)\n", rows, vocab, k,
                1000.0 * ms / iters, rows * double(vocab) * 4 / 1e6);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
}

// The experts' GEMM of a prefill (more tokens than the decode GEMV takes), routed as moe_sort
// leaves it: slots grouped by expert, tokens in order within an expert (here by a counting
// sort on the host). T tokens each choose K distinct experts; the last expert gets none.
struct ExpertRouting {
  std::vector<uint32_t> offsets, slot_token;
  ExpertRouting(uint32_t T, uint32_t E, uint32_t K, uint32_t seed) : offsets(E + 1, 0) {
    std::mt19937 rng(seed);
    std::vector<std::vector<uint32_t>> tokens_of(E);
    for (uint32_t t = 0; t < T; ++t) {
      std::vector<uint32_t> pool(E - 1);
      for (uint32_t e = 0; e + 1 < E; ++e) pool[e] = e;
      std::shuffle(pool.begin(), pool.end(), rng);
      for (uint32_t k = 0; k < K; ++k) tokens_of[pool[k]].push_back(t);
    }
    for (uint32_t e = 0; e < E; ++e) {
      offsets[e + 1] = offsets[e] + static_cast<uint32_t>(tokens_of[e].size());
      slot_token.insert(slot_token.end(), tokens_of[e].begin(), tokens_of[e].end());
    }
  }
};

// moe_expert_gemm over the routing, gathered, F32 out [T K][rows]; tensor cores or the tiles.
std::vector<float> expert_gemm(bool tensor_cores, const Dev<uint16_t>& w, const Dev<uint16_t>& x,
                               const Dev<uint32_t>& offsets, const Dev<uint32_t>& slot_token,
                               uint32_t T, uint32_t E, uint32_t K, uint32_t rows, uint32_t cols,
                               size_t ld_x) {
  Dev<float> y(size_t{T} * K * rows);
  set_moe_tensor_cores(tensor_cores);
  moe_expert_gemm(w.get(), DType::BF16, E, rows, cols, x.get(), DType::BF16, ld_x, slot_token.get(),
                  true, offsets.get(), y.get(), DType::F32, rows, T, K, nullptr);
  set_moe_tensor_cores(true);
  PITH_CUDA_CHECK(cudaDeviceSynchronize());
  return y.read();
}

// Tensor cores against the CUDA-core tiles on the device (the same BF16 products; F32 sums in
// another order): an expert with more slots than one pass, row and column tails, and rows
// without 16-byte vectors.
TEST(CudaKernels, MoeExpertGemmTensorCoresMatchTheTiles) {
  struct Shape {
    uint32_t T, E, K, rows, cols, x_pad;
  };
  for (const Shape& sh : {Shape{100, 4, 2, 200, 136, 8}, Shape{40, 6, 3, 64, 45, 3}}) {
    const ExpertRouting r(sh.T, sh.E, sh.K, sh.T);
    const size_t ld_x = sh.cols + sh.x_pad;
    Dev<uint16_t> w(to_bf16(random_floats(size_t{sh.E} * sh.rows * sh.cols, 1, 0.2f)));
    Dev<uint16_t> x(to_bf16(random_floats(size_t{sh.T} * ld_x, 2)));
    Dev<uint32_t> offsets(r.offsets), slot_token(r.slot_token);
    const std::vector<float> tiles =
        expert_gemm(false, w, x, offsets, slot_token, sh.T, sh.E, sh.K, sh.rows, sh.cols, ld_x);
    const std::vector<float> mma =
        expert_gemm(true, w, x, offsets, slot_token, sh.T, sh.E, sh.K, sh.rows, sh.cols, ld_x);
    for (size_t i = 0; i < tiles.size(); ++i)
      ASSERT_NEAR(mma[i], tiles[i], 1e-4f * (1 + std::fabs(tiles[i])))
          << "cols " << sh.cols << " at " << i;
  }
}

// Both forms timed (CUDA events) on a Qwen3-30B-A3B layer's gate/up product over a 512-token
// prefill chunk: 128 experts, 8 per token, d 2048, 2 x 768 rows. One JSON line.
TEST(CudaKernels, MoeExpertGemmTiming) {
  PITH_SKIP_TIMING_ON_SIM();
  const uint32_t T = 512, E = 128, K = 8, rows = 2 * 768, cols = 2048;
  const ExpertRouting r(T, E, K, 7);
  Dev<uint16_t> w(to_bf16(random_floats(size_t{E} * rows * cols, 1, 0.2f)));
  Dev<uint16_t> x(to_bf16(random_floats(size_t{T} * cols, 2)));
  Dev<uint32_t> offsets(r.offsets), slot_token(r.slot_token);
  Dev<float> y(size_t{T} * K * rows);
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  double ms[2] = {0, 0};
  const int iters = 10;
  for (int tc = 0; tc < 2; ++tc) {
    set_moe_tensor_cores(tc == 1);
    auto run = [&] {
      moe_expert_gemm(w.get(), DType::BF16, E, rows, cols, x.get(), DType::BF16, cols,
                      slot_token.get(), true, offsets.get(), y.get(), DType::F32, rows, T, K,
                      nullptr);
    };
    run();  // warm-up
    CUDA_OK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i) run();
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, start, stop));
    ms[tc] = double(t) / iters;
  }
  set_moe_tensor_cores(true);
  const double flop = 2.0 * T * K * rows * cols;
  std::printf(
      "{\"moe_expert_gemm\":\"T=%u E=%u K=%u rows=%u cols=%u\",\"tiles_ms\":%.3f,"
      "\"tensor_cores_ms\":%.3f,\"tensor_cores_tflop_s\":%.1f,\"speedup\":%.2f}\n",
      T, E, K, rows, cols, ms[0], ms[1], flop / ms[1] / 1e9, ms[0] / ms[1]);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// A capture invalidated by a call a graph cannot hold (here a wait on the capturing stream)
// surfaces as an exception from the step's launches; the step then runs eagerly instead of failing,
// and later steps of the key still capture. An error of the step itself, with the capture intact,
// propagates.
TEST(DecodeGraphsCapture, AnInvalidatedCaptureRunsTheStepEagerly) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Dev<float> buf(std::vector<float>(256, 1.0f));
  const auto clear = [&] { PITH_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, 256 * 4, stream)); };
  const auto invalidating = [&] {
    clear();
    PITH_CUDA_CHECK(cudaStreamSynchronize(stream));  // not allowed while the stream captures
  };
  DecodeGraphs graphs;
  EXPECT_FALSE(graphs.run(1, 7, stream, clear));  // the key's eager warm-up
  EXPECT_FALSE(graphs.run(1, 7, stream, invalidating));
  EXPECT_EQ(graphs.captures(), 0u);
  EXPECT_TRUE(graphs.usable());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(graphs.run(1, 7, stream, clear));  // captured and launched
  EXPECT_TRUE(graphs.run(1, 7, stream, clear));  // replayed
  EXPECT_EQ(graphs.captures(), 1u);
  EXPECT_EQ(graphs.replays(), 1u);
  const auto failing = [] { throw Error("the step's own error"); };
  EXPECT_THROW(graphs.run(1, 8, stream, failing), Error);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(buf.read()[0], 0.0f);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace pith::cuda

PITH_GPU_TEST_MAIN()
