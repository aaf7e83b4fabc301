// PagedAttention on the device against the CPU engine's attention over the same K/V: the own
// kernel (F32 and BF16) and FlashInfer's BF16 prefill (head_dim 64 and 128, when built with it),
// on batches that take each launch: causal prefill + decode, decode only, causal + custom masks
// (a tree draft, a mask hiding whole chunks), rows out of plan order (own kernel fallback), and
// the families' query scale, soft-cap and sliding window, and gemma4's head_dim 512 in a pool
// whose layers differ in shape.
// The tiny test models have head_dim 16, so this is what exercises FlashInfer directly (and
// CudaAttentionChoice, a generated head_dim-64 model through the backend on either kernel). Long
// decodes run the own kernel with and without split-K; PagedAttentionGpuTimes times both, and
// the chunk reductions from partials against the former per-thread rescans.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend_test_models.h"
#include "common/error.h"
#include "engine/attention.h"
#include "engine/cuda/attention/paged_attention_kernel.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/paged_attention.h"
#include "gpu_test_main.h"

namespace pith::cuda {
namespace {

using Mask = std::vector<std::vector<uint32_t>>;

#if PITH_HAVE_FLASHINFER
constexpr bool kFlashInferBuilt = true;
#else
constexpr bool kFlashInferBuilt = false;
#endif

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Case {
  uint32_t head_dim, n_heads, n_kv_heads;
  bool bf16, flashinfer;
  // Layer 0 of the pool has another shape (gemma4's sliding layers beside a global one): the
  // tested layer's blocks sit at a per-layer offset of each page, on the own kernel.
  bool mixed_layers = false;
};

struct Spec {
  uint32_t ctx, n_q;
  int mask;  // 0 causal, 1 tree draft, 2 sink + window (hides whole chunks)
};

class PagedAttentionGpu : public ::testing::TestWithParam<Case> {
 protected:
  // Runs `specs` (rows in plan order, or reversed) through CPU attention and PagedAttention
  // (once per split limit in `max_splits`, against the one CPU result) and compares every output
  // element.
  void check_batch(const std::vector<Spec>& specs, bool reverse_rows, bool expect_flashinfer,
                   const AttentionOptions& options = {},
                   const std::vector<uint32_t>& max_splits = {attn::kMaxSplits}) {
    const Case c = GetParam();
    const uint32_t n_layers = 2, layer = 1, page_size = 16, hd = c.head_dim;
    KvShape ks{n_layers, c.n_kv_heads, hd, page_size, {}};
    KvPoolLayout layout{
        c.bf16 ? DType::BF16 : DType::F32, n_layers, c.n_kv_heads, hd, page_size, {}};
    if (c.mixed_layers) {
      ks.layers = {{2 * c.n_kv_heads, 32}, {c.n_kv_heads, hd}};
      layout.layers = {{2 * c.n_kv_heads, 32}, {c.n_kv_heads, hd}};
    }
    size_t n_pages = 1;
    for (const Spec& s : specs) n_pages += (s.ctx + page_size - 1) / page_size;
    KvPool cpu_kv(ks, ks.page_bytes() * n_pages);
    std::vector<float> pool_f32(layout.page_elems() * cpu_kv.n_pages());
    std::mt19937 rng(hd + c.n_heads * 5 + c.bf16 + specs.size() * 11);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto round_bf16 = [](float x) { return attn::to_float(attn::from_float<attn::Bf16>(x)); };
    auto value = [&] { return c.bf16 ? round_bf16(nd(rng)) : nd(rng); };

    uint32_t n_tokens = 0;
    for (const Spec& s : specs) n_tokens += s.n_q;
    const uint32_t q_dim = c.n_heads * hd;
    std::vector<float> q(size_t{n_tokens} * q_dim), cpu_out(q.size(), 0.f);
    for (float& x : q) x = value();

    std::vector<std::vector<uint32_t>> pages;
    std::vector<Mask> masks(specs.size());
    std::vector<pith::AttentionSequence> cpu_seqs;
    std::vector<AttentionSequence> seqs;
    uint32_t row = reverse_rows ? n_tokens : 0;
    pages.reserve(specs.size());
    for (size_t si = 0; si < specs.size(); ++si) {
      const Spec& s = specs[si];
      auto p = cpu_kv.allocate((s.ctx + page_size - 1) / page_size);
      std::shuffle(p.begin(), p.end(), rng);
      pages.push_back(p);
      for (uint32_t slot = 0; slot < s.ctx; ++slot)
        for (uint32_t l = 0; l < n_layers; ++l) {
          const size_t kv_dim = layout.kv_dim_of(l);
          std::vector<float> k(kv_dim), v(kv_dim);
          for (float& x : k) x = value();
          for (float& x : v) x = value();
          cpu_kv.write(p[slot / page_size], slot % page_size, l, k.data(), v.data());
          for (uint32_t kv = 0; kv < 2; ++kv)
            std::copy_n(kv ? v.data() : k.data(), kv_dim,
                        pool_f32.begin() + layout.block_offset(p[slot / page_size], l, kv) +
                            size_t{slot % page_size} * kv_dim);
        }
      const uint32_t prefix = s.ctx - s.n_q;
      if (s.mask == 1)
        masks[si] = {{prefix + 1, 3}, {prefix + 2, 2}, {prefix + 1, 1, 1, 1}, {prefix, 1, 2, 1}};
      if (s.mask == 2)
        for (uint32_t i = 0; i < s.n_q; ++i)
          masks[si].push_back({4, prefix + i + 1 - 24, 20, s.n_q - 1 - i});
      if (reverse_rows) row -= s.n_q;
      pith::AttentionSequence cs;
      cs.q = q.data() + size_t{row} * q_dim;
      cs.out = cpu_out.data() + size_t{row} * q_dim;
      cs.n_inputs = s.n_q;
      cs.context_len = s.ctx;
      cs.pages = pages.back();
      cs.mask = s.mask ? &masks[si] : nullptr;
      cpu_seqs.push_back(cs);
      seqs.push_back({row, s.n_q, pages.back(), s.ctx, s.mask ? &masks[si] : nullptr});
      if (!reverse_rows) row += s.n_q;
    }
    ThreadPool threads(2);
    AttentionScratch scratch;
    pith::attention(threads, cpu_kv, layer, c.n_heads, cpu_seqs, scratch,
                    AttentionParams{options.scale, options.softcap, options.window});

    // Device copies in the layout's element type.
    const size_t es = layout.elem_bytes();
    auto to_device_bytes = [&](const std::vector<float>& v) {
      std::vector<uint8_t> b(v.size() * es);
      for (size_t i = 0; i < v.size(); ++i) {
        if (c.bf16) {
          const attn::Bf16 h = attn::from_float<attn::Bf16>(v[i]);
          std::memcpy(b.data() + i * 2, &h, 2);
        } else {
          std::memcpy(b.data() + i * 4, &v[i], 4);
        }
      }
      return b;
    };
    const auto pool_bytes = to_device_bytes(pool_f32), q_bytes = to_device_bytes(q);
    void *d_pool = nullptr, *d_q = nullptr, *d_out = nullptr;
    CHECK_CUDA(cudaMalloc(&d_pool, pool_bytes.size()));
    CHECK_CUDA(cudaMalloc(&d_q, q_bytes.size()));
    CHECK_CUDA(cudaMalloc(&d_out, q_bytes.size()));
    CHECK_CUDA(cudaMemcpy(d_pool, pool_bytes.data(), pool_bytes.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_q, q_bytes.data(), q_bytes.size(), cudaMemcpyHostToDevice));
    for (const uint32_t splits : max_splits) {
      SCOPED_TRACE("max_splits " + std::to_string(splits));
      check_device(layout, d_q, d_pool, d_out, q_bytes.size(), seqs, q, cpu_out, expect_flashinfer,
                   options, splits);
    }
    cudaFree(d_pool);
    cudaFree(d_q);
    cudaFree(d_out);
  }

  // One PagedAttention run of `seqs` over the uploaded pool and queries, compared with cpu_out.
  void check_device(const KvPoolLayout& layout, const void* d_q, const void* d_pool, void* d_out,
                    size_t out_bytes_size, const std::vector<AttentionSequence>& seqs,
                    const std::vector<float>& q, const std::vector<float>& cpu_out,
                    bool expect_flashinfer, const AttentionOptions& options, uint32_t max_splits) {
    const Case c = GetParam();
    const uint32_t layer = 1, hd = c.head_dim, q_dim = c.n_heads * hd;
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    CHECK_CUDA(cudaMemset(d_out, 0xff, out_bytes_size));  // NaN-filled: every row must be written

    PagedAttention attention(layout, c.n_heads, 8, 2, c.flashinfer);
    attention.set_max_kv_splits(max_splits);
#if PITH_HAVE_FLASHINFER
    if (expect_flashinfer && c.flashinfer && c.bf16 && (hd == 64 || hd == 128)) {
      EXPECT_STREQ(attention.implementation(), "flashinfer");
    }
#endif
    // Twice: the second plan reuses the staging (and waits for the first upload).
    for (int round = 0; round < 2; ++round) {
      attention.plan(seqs, stream);
      attention.run(layer, d_q, d_pool, d_out, stream, options);
    }
    std::vector<uint8_t> out_bytes(out_bytes_size);
    CHECK_CUDA(
        cudaMemcpyAsync(out_bytes.data(), d_out, out_bytes.size(), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaStreamDestroy(stream);

    // Soft-capped and windowed layers always run on the own kernel.
    const bool fi = std::string(attention.implementation()) == "flashinfer" &&
                    options.softcap == 0 && options.window == 0;
    for (size_t i = 0; i < q.size(); ++i) {
      float got;
      if (c.bf16) {
        attn::Bf16 h;
        std::memcpy(&h, out_bytes.data() + i * 2, 2);
        got = attn::to_float(h);
      } else {
        std::memcpy(&got, out_bytes.data() + i * 4, 4);
      }
      // FlashInfer multiplies P (rounded to BF16) by V on tensor cores: 2^-8 relative per term.
      const float tol = !c.bf16 ? 1e-4f
                        : fi    ? 2e-2f * (1 + std::abs(cpu_out[i]))
                                : 1e-4f + std::abs(cpu_out[i]) / 128;
      ASSERT_NEAR(got, cpu_out[i], tol) << "element " << i << " row " << i / q_dim;
    }
  }
};

TEST_P(PagedAttentionGpu, CausalPrefillAndDecode) {
  check_batch({{45, 9, 0}, {30, 1, 0}, {1, 1, 0}, {200, 64, 0}}, false, true);
}

TEST_P(PagedAttentionGpu, DecodeOnly) {
  check_batch({{30, 1, 0}, {700, 1, 0}, {17, 1, 0}, {2048, 1, 0}}, false, true);
}

TEST_P(PagedAttentionGpu, CausalAndCustomMasksInOneBatch) {
  check_batch({{45, 9, 0}, {21, 4, 1}, {30, 1, 0}, {300, 3, 2}}, false, true);
}

TEST_P(PagedAttentionGpu, RowsOutOfPlanOrderUseTheOwnKernel) {
  check_batch({{45, 9, 0}, {21, 4, 1}}, true, false);
}

// The families' options: a custom query scale (FlashInfer's sm_scale where it runs), and gemma's
// soft-cap with a sliding window (the own kernel), over windows inside one chunk and across many.
TEST_P(PagedAttentionGpu, CustomQueryScale) {
  check_batch({{45, 9, 0}, {30, 1, 0}, {300, 3, 2}}, false, true, {0.0625f, 0, 0});
}

TEST_P(PagedAttentionGpu, SoftCapAndSlidingWindow) {
  check_batch({{45, 9, 0}, {21, 4, 1}, {700, 1, 0}}, false, false, {0.07f, 50.f, 16});
  check_batch({{200, 64, 0}, {30, 1, 0}}, false, false, {0, 0, 150});
}

// Long decodes: few blocks, so the own kernel splits the context (split-K) unless told not to;
// both give the CPU's output.
TEST_P(PagedAttentionGpu, LongDecodeWithAndWithoutKvSplits) {
  check_batch({{9000, 1, 0}, {1500, 1, 0}, {3000, 1, 2}}, false, true, {}, {1u, attn::kMaxSplits});
  check_batch({{5000, 1, 0}}, false, false, {0.07f, 30.f, 1000}, {1u, attn::kMaxSplits});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionGpu,
    ::testing::Values(Case{64, 8, 2, false, true}, Case{128, 32, 8, false, true},
                      Case{64, 32, 8, true, true}, Case{128, 32, 8, true, true},
                      Case{128, 32, 8, true, false}, Case{64, 8, 1, true, false},
                      Case{16, 4, 2, true, true},
                      // gemma4's global layers: head_dim 512 beside
                      // sliding layers of another shape
                      Case{512, 8, 1, true, true, true}, Case{512, 16, 2, false, true, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.n_heads) + "_kv" +
             std::to_string(c.n_kv_heads) + (c.bf16 ? "_bf16" : "_f32") +
             (c.flashinfer ? "" : "_own") + (c.mixed_layers ? "_mixed" : "");
    });

// Decode attention time of the own kernel with one split and with split-K, and FlashInfer's
// where built (BF16, head_dim 64/128), at batch 1 and 8 and 4k / 32k context: one JSON line
// per case with the K/V read rate (the bytes every row must read / time) and the speedup.
double median_decode_ms(PagedAttention& attention, const std::vector<AttentionSequence>& seqs,
                        const void* q, const void* pool, void* out, cudaStream_t stream) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  attention.plan(seqs, stream);
  std::vector<double> ms;
  for (int rep = 0; rep < 12; ++rep) {
    cudaEventRecord(a, stream);
    attention.run(0, q, pool, out, stream);
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (rep > 1) ms.push_back(t);  // the first runs warm up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

TEST(PagedAttentionGpuTimes, DecodeSplitsAgainstOneSplit) {
  PITH_SKIP_TIMING_ON_SIM();
  struct Shape {
    const char* name;
    uint32_t n_heads, n_kv_heads, head_dim;
  };
  const Shape shapes[] = {{"llama3.1-8b", 32, 8, 128}, {"llama3.2-1b", 32, 8, 64}};
  const uint32_t page_size = 16;
  for (const Shape& sh : shapes)
    for (const uint32_t batch : {1u, 8u})
      for (const uint32_t ctx : {4096u, 32768u}) {
        const KvPoolLayout layout{DType::BF16, 1, sh.n_kv_heads, sh.head_dim, page_size, {}};
        const uint32_t pages_per_seq = ctx / page_size;
        const size_t pool_bytes = layout.page_elems() * layout.elem_bytes() * pages_per_seq * batch;
        const size_t q_bytes = size_t{batch} * sh.n_heads * sh.head_dim * 2;
        void *pool = nullptr, *q = nullptr, *out = nullptr;
        CHECK_CUDA(cudaMalloc(&pool, pool_bytes));
        CHECK_CUDA(cudaMalloc(&q, q_bytes));
        CHECK_CUDA(cudaMalloc(&out, q_bytes));
        CHECK_CUDA(cudaMemset(pool, 0x3c, pool_bytes));  // BF16 0x3c3c: 0.0115 everywhere
        CHECK_CUDA(cudaMemset(q, 0x3c, q_bytes));
        std::vector<std::vector<uint32_t>> pages(batch);
        std::vector<AttentionSequence> seqs;
        for (uint32_t s = 0; s < batch; ++s) {
          for (uint32_t i = 0; i < pages_per_seq; ++i) pages[s].push_back(s * pages_per_seq + i);
          seqs.push_back({s, 1, pages[s], ctx, nullptr});
        }
        cudaStream_t stream;
        CHECK_CUDA(cudaStreamCreate(&stream));
        PagedAttention own(layout, sh.n_heads, batch, batch, false);
        own.set_max_kv_splits(1);
        const double one = median_decode_ms(own, seqs, q, pool, out, stream);
        own.set_max_kv_splits(attn::kMaxSplits);
        const double split = median_decode_ms(own, seqs, q, pool, out, stream);
        own.set_chunk_rescan(true);  // the chunk reductions' former form, same launch otherwise
        const double rescan = median_decode_ms(own, seqs, q, pool, out, stream);
        own.set_chunk_rescan(false);
        PagedAttention fi(layout, sh.n_heads, batch, batch, true);
        const bool have_fi = std::string(fi.implementation()) == "flashinfer";
        const double fi_ms = have_fi ? median_decode_ms(fi, seqs, q, pool, out, stream) : 0;
        CHECK_CUDA(cudaStreamSynchronize(stream));
        CHECK_CUDA(cudaGetLastError());
        const double gb = double(pool_bytes) / 1e9;
        std::printf(
            "{\"attention_gpu\":\"%s b%u ctx%u\",\"one_split_ms\":%.4f,\"split_k_ms\":%.4f,"
            "\"rescan_split_k_ms\":%.4f,\"flashinfer_ms\":%.4f,\"split_k_gb_s\":%.0f,"
            "\"speedup\":%.2f,\"partials_speedup\":%.2f}\n",
            sh.name, batch, ctx, one, split, rescan, fi_ms, gb / (split * 1e-3), one / split,
            rescan / split);
        cudaStreamDestroy(stream);
        cudaFree(pool);
        cudaFree(q);
        cudaFree(out);
        EXPECT_GT(split, 0.0);
      }
}

// --cuda-attention at the backend: pith keeps every layer on the own kernel; flashinfer runs a
// model FlashInfer fits (BF16, head_dim 64) where the build has it, with auto's next-token
// distribution, and is otherwise a startup error saying why (an F32 model in any build).
TEST(CudaAttentionChoice, PithFlashInferAndAuto) {
  const auto bf16 = load(generated_model("llama", pith::DType::BF16, "tiny256"));
  ASSERT_EQ(bf16->config.head_dim, 64u);
  BackendOptions bo;
  bo.kv_memory_bytes = size_t{4} << 20;
  auto refused = [&](std::shared_ptr<const ModelWeights> w, const char* why) {
    try {
      make_cuda_backend(w, bo, 0);
      ADD_FAILURE() << "--cuda-attention flashinfer was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--cuda-attention flashinfer: ") + why),
                std::string::npos)
          << e.what();
    }
  };
  bo.cuda_attention = CudaAttention::Pith;
  auto own = make_cuda_backend(bf16, bo, 0);
  EXPECT_EQ(own->info().attention, "pith");
  bo.cuda_attention = CudaAttention::Auto;
  EXPECT_EQ(make_cuda_backend(load(data_path("models/tiny-f32.gguf")), bo, 0)->info().attention,
            "pith");
  bo.cuda_attention = CudaAttention::FlashInfer;
  refused(load(data_path("models/tiny-f32.gguf")),
          kFlashInferBuilt ? "FlashInfer is instantiated for BF16" : "this build has no");
  if (!kFlashInferBuilt) {
    refused(bf16, "this build has no FlashInfer");
    return;
  }
  auto fi = make_cuda_backend(bf16, bo, 0);
  EXPECT_EQ(fi->info().attention, "flashinfer");
  // A 40-token prefill (three pages) on each: FlashInfer's distribution is the own kernel's.
  const uint32_t n = 40, ps = bo.kv_page_size;
  SequenceInput s;
  s.tokens = random_tokens(n, 3, static_cast<int32_t>(bf16->config.vocab_size));
  for (uint32_t i = 0; i < n; ++i) s.positions.push_back(i);
  s.last_page_len = last_len(n, ps);
  s.outputs = {{n - 1, OutputKind::TopK, 8, 0}};
  s.kv_pages = own->page_slots().allocate(pages_for(n, ps));
  const auto a = own->forward({s});
  s.kv_pages = fi->page_slots().allocate(pages_for(n, ps));
  const auto b = fi->forward({s});
  const auto& da = a[0].outputs[0].dist;
  const auto& db = b[0].outputs[0].dist;
  ASSERT_EQ(da.ids.size(), 8u);
  EXPECT_EQ(da.ids[0], db.ids[0]);
  for (size_t i = 0; i < db.ids.size(); ++i) {
    const auto it = std::find(da.ids.begin(), da.ids.end(), db.ids[i]);
    if (it != da.ids.end()) {
      EXPECT_NEAR(db.probs[i], da.probs[it - da.ids.begin()], 2e-2);
    }
  }
}

}  // namespace
}  // namespace pith::cuda

PITH_GPU_TEST_MAIN()
